"""Runtime ``function``: a Python reward function, ``module:function(prompt, response) -> float``, called in a
pool of ``workers`` processes with a deadline per call (rlsim.rewards.call_pool)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlsim.errors import RlsimError
from rlsim.models.reward import RewardModelSpec
from rlsim.rewards.call_pool import CallPool
from rlsim.rewards.options import DROPPED, parse_options
from rlsim.rewards.text_reward import TextReward
from rlsim.scoring.base import RuntimeInfo, ScorerSettings, register_scorer


@register_scorer("function", RuntimeInfo(precision=None, kind="function"))
class FunctionReward(TextReward):
    """``reward.function`` settings (rlsim.rewards.options.FunctionOptions); the reward model is not used."""

    name = "function"

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings) -> None:
        self.options = parse_options("function", settings.options)
        super().__init__(self.options.on_timeout, self.options.default_reward)
        self._pool = CallPool(self.options.target, self.options.workers, self.options.timeout_s)

    def score_pairs(self, prompts: Sequence[str], responses: Sequence[str]) -> np.ndarray:
        o = self.options
        rewards = np.empty(len(prompts), dtype=np.float32)
        for i, outcome in enumerate(self._pool.map(list(zip(prompts, responses, strict=True)))):
            if outcome.status == "ok":
                rewards[i] = outcome.value
            elif outcome.status == "timeout":
                rewards[i] = self._timed_out(
                    f"{o.target} took more than {o.timeout_s:g} s on item {i} of the batch", "reward.function.timeout_s"
                )
            else:
                rewards[i] = self._failed(i, outcome.detail)
        self._count(len(prompts), sum(len(r) for r in responses))
        return rewards

    def _failed(self, i: int, detail: str) -> float:
        self._outcomes["errors"] += 1
        if self.options.on_error == "fail":
            raise RlsimError(
                f"the reward function {self.options.target} failed on item {i} of the batch: {detail} "
                "(reward.function.on_error: fail; set it to default to give such rollouts default_reward, "
                "or to drop to leave their groups out of the update)"
            )
        if self.options.on_error == "drop":
            self._outcomes["dropped"] += 1
            return DROPPED
        return self.options.default_reward

    def close(self) -> None:
        self._pool.close()
