"""Runtime ``sandbox``: each response's program run in a fresh sandbox (rlsim.rewards.sandbox); reward 1.0 when
it exits 0 (its checks passed), else 0.0. With ``program: bank`` (the default) the program is the installed
doctest program nearest the response's length (rlsim.rewards.program_bank), since a random-weight policy
writes no code; each step's record counts these stand-ins as ``bank_programs``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from rlsim.models.reward import RewardModelSpec
from rlsim.rewards.options import parse_options
from rlsim.rewards.program_bank import ProgramBank, build_bank
from rlsim.rewards.sandbox import SandboxLimits, check_namespaces, run_program
from rlsim.rewards.text_reward import TextReward
from rlsim.scoring.base import RuntimeInfo, ScorerSettings, register_scorer

CODE_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


@register_scorer("sandbox", RuntimeInfo(precision=None, kind="sandbox"))
class SandboxReward(TextReward):
    """``reward.sandbox`` settings (rlsim.rewards.options.SandboxOptions); the reward model is not used."""

    name = "sandbox"

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings) -> None:
        o = self.options = parse_options("sandbox", settings.options)
        super().__init__(o.on_timeout, o.default_reward)
        self.limits = SandboxLimits(o.wall_s, o.cpu_s, o.memory_mb, o.max_processes, o.max_file_mb, o.isolate)
        if o.isolate:
            check_namespaces()
        self._threads = ThreadPoolExecutor(o.workers, thread_name_prefix="sandbox")
        self.bank: ProgramBank | None = None
        if o.program == "bank":  # built with fixed limits, so every configuration runs the same programs
            probe = SandboxLimits(isolate=o.isolate)
            self.bank = build_bank(lambda src: _passed(run_program(src, probe)), workers=o.workers)

    def score_pairs(self, prompts: Sequence[str], responses: Sequence[str]) -> np.ndarray:
        programs = [self._program(r) for r in responses]
        results = list(self._threads.map(lambda p: run_program(p, self.limits) if p else None, programs))
        rewards = np.zeros(len(responses), dtype=np.float32)
        for i, result in enumerate(results):
            if result is None:
                self._outcomes["no_program"] += 1
                continue
            self._outcomes["programs_run"] += 1
            if result.timed_out:
                rewards[i] = self._timed_out(
                    f"a sandboxed program ran past {self.limits.wall_s:g} s (item {i} of the batch)",
                    "reward.sandbox.wall_s",
                )
            elif result.passed:
                rewards[i] = 1.0
                self._outcomes["passed"] += 1
        self._count(len(responses), sum(len(p or "") for p in programs))
        return rewards

    def _program(self, response: str) -> str | None:
        if self.bank is not None:
            self._outcomes["bank_programs"] += 1
            return self.bank.pick(len(response)).source
        block = CODE_BLOCK.search(response)
        return block.group(1) if block else None

    def close(self) -> None:
        self._threads.shutdown(wait=True)


def _passed(result) -> tuple[bool, float]:
    return result.passed, result.seconds
