"""The contention experiment's config: a ``contention`` section plus the loop config it runs (``loop``).

``loop`` is exactly ``rlsim run``'s config (rlsim/loop/config/__init__.py). The experiment decides three of
its settings itself and says so instead of silently ignoring them: ``loop.reward.runtime`` (each
runtime in ``contention.runtimes`` in turn), ``loop.steps`` (``contention.steps_per_condition``, or
``contention.async_updates`` under async) and ``loop.schedule`` (the "together" condition is
``overlapped``, unless the loop says ``async``: then it is a whole async pipeline of
``async_updates`` updates, and the time-boxed condition, a synchronous construct, is not run).

``loop.trainer.algorithm: ppo`` (or a KL, ``kl.coef > 0``) starts the reference and the critic too:
the together step is then the PPO step, every micro-batch going to the scorer, the reference and the
critic at once, and each role's core-seconds are measured on its own process.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlsim.bench.scoring_config import check_runtimes
from rlsim.config_loader import describe_error, load_config
from rlsim.errors import ConfigError
from rlsim.experiment.fidelity_source import FidelitySettings, fidelity_problems
from rlsim.loop.config import RewardConfig, RunConfig, cross_field_problems
from rlsim.loop.config.algorithm import run_roles
from rlsim.placement import EXPERIENCE_ROLES
from rlsim.schedule_kinds import schedule_kind
from rlsim.scoring.base import SCORERS, runtime_names

CONDITIONS = ("gen_alone", "score_alone", "together", "timeboxed")
# Under ``schedule: async`` the pipeline itself counts rollouts trained per hour, which is what the
# time-boxed condition approximates for a synchronous step; so it is left out.
ASYNC_CONDITIONS = ("gen_alone", "score_alone", "together")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TimeboxSettings(_Strict):
    """Time-boxed steps: generation keeps producing rollouts for ``budget_s`` wall-clock seconds while
    scoring keeps up; rollouts generated *and* scored within the budget are counted. ``micro_batch``:
    rollouts per micro-batch streamed to the scorer (smaller counts finer at the deadline)."""

    budget_s: float = Field(6.0, gt=0)
    micro_batch: int = Field(4, ge=1)


class QuickSettings(_Strict):
    """What ``--quick`` puts in place of ``runtimes``, ``repeats``, ``steps_per_condition``,
    ``together_trials`` and ``timebox.budget_s`` (change a quick run with ``--set contention.quick.repeats=3``)."""

    runtimes: list[str] = Field(default_factory=lambda: ["eager", "ort-int8"])
    repeats: int = Field(2, ge=2)
    steps_per_condition: int = Field(1, ge=1)
    together_trials: int = Field(1, ge=1)
    budget_s: float = Field(5.0, gt=0)


class ContentionSettings(_Strict):
    """``runtimes`` compared against ``baseline``; ``repeats`` independent repeats (each a fresh Ray
    session unless ``session_per_repeat`` is false); ``steps_per_condition`` measured steps per
    condition, runtime and repeat (averaged into one sample per repeat).

    ``together_trials``: the "together" step is run this many times (same requests) per step, runtime
    and repeat. Freed capacity is a difference of two runtimes' scoring core-seconds in that step, and
    one step's contention is noisy (how the scorer's threads and vLLM's interleave), so averaging a
    few trials narrows its CI for about 6 s per extra trial and runtime on this machine.
    ``settle_max_s``: before each measured condition, wait (up to this long) until every actor is idle,
    so a condition does not start inside the previous one's tail (vLLM keeps up to half a core busy
    for about a second after its last request); 0 turns the wait off.

    Precision (rlsim/experiment/stopping.py): ``target_ci`` is the freed core-s CI half-width wanted,
    as a share of |mean| (0.10 = 10 %); ``max_minutes`` the wall-clock budget. ``repeats: null`` runs
    repeats (at least 3) until every compared runtime meets ``target_ci`` or the next repeat would end
    past ``max_minutes``; a number runs exactly that many (within ``max_minutes`` if set) and only
    reports the precision reached against ``target_ci``.

    ``variants``: named reward settings compared like runtimes, each a part of a reward section merged into
    ``loop.reward`` (nested sections key by key), e.g. ``{small-judge: {runtime: genrm, genrm: {judge:
    small-llama}}, tiny-judge: {runtime: genrm, genrm: {judge: tiny-llama}}}``: a name of ``runtimes`` (and
    ``baseline``) that is a variant scores with those settings. So the freed capacity of a smaller judge, of a
    verifier pool of 4 workers against 2 or of a sandbox without isolation is measured like a faster runtime's.

    ``fidelity`` (rlsim/experiment/fidelity_source.py): each runtime's reward fidelity, measured before the
    first repeat (cached per machine) or read from a ``rlsim verify --fidelity --json`` file; the report ranks
    runtimes by freed capacity among those that pass (rlsim/experiment/fidelity_rank.py)."""

    runtimes: list[str] = Field(default_factory=runtime_names)  # every built-in runtime
    baseline: str = "eager"
    repeats: int | None = Field(5, ge=2, description="at least 2: a CI needs two independent samples")
    target_ci: float | None = Field(None, gt=0)
    max_minutes: float | None = Field(None, gt=0)
    steps_per_condition: int = Field(1, ge=1)
    together_trials: int = Field(1, ge=1)
    settle_max_s: float = Field(3.0, ge=0)
    async_updates: int = Field(
        4, ge=2, description="schedule async: updates per together run (generation runs ahead from the second on)"
    )
    session_per_repeat: bool = True
    timebox: TimeboxSettings = Field(default_factory=TimeboxSettings)
    quick: QuickSettings = Field(default_factory=QuickSettings)
    fidelity: FidelitySettings = Field(default_factory=FidelitySettings)
    variants: dict[str, dict[str, Any]] = Field(default_factory=dict)


class ContentionConfig(_Strict):
    contention: ContentionSettings = Field(default_factory=ContentionSettings)
    loop: RunConfig = Field(default_factory=RunConfig)

    @property
    def is_async(self) -> bool:
        return schedule_kind(self.loop.schedule).pipelined

    @property
    def conditions(self) -> tuple[str, ...]:
        """The conditions measured per runtime (async leaves out the time-boxed one)."""
        return ASYNC_CONDITIONS if self.is_async else CONDITIONS

    def runtime_of(self, name: str) -> str:
        """The scoring runtime a compared name runs: a variant's (``contention.variants``), or the name itself."""
        if name in self.contention.variants:
            return str(self.contention.variants[name].get("runtime", self.loop.reward.runtime))
        return name

    def reward_for(self, name: str) -> RewardConfig:
        """``loop.reward`` scoring with ``name``: the runtime of that name, or a variant's settings merged in
        (``pydantic.ValidationError`` if they do not make a valid reward section)."""
        if name not in self.contention.variants:
            return self.loop.reward.model_copy(update={"runtime": name})
        merged = deep_merge(self.loop.reward.model_dump(exclude_unset=True), self.contention.variants[name])
        return RewardConfig.model_validate(merged)

    def for_runtime(self, runtime: str) -> RunConfig:
        """The loop config with ``runtime`` (a runtime or a variant's name) scoring, the together condition's
        schedule (overlapped, or async: the generator must report behaviour log-probs and the trainer correct for
        them, both set at actor start) and the experiment's step count."""
        reward = self.reward_for(runtime)
        schedule, steps = "overlapped", self.contention.steps_per_condition
        if self.is_async:
            schedule, steps = "async", self.contention.async_updates
        return self.loop.model_copy(update={"reward": reward, "schedule": schedule, "steps": steps})


def load_contention_config(
    path: str | Path,
    overrides: Sequence[str] = (),
    quick: bool = False,
    repeats: int | None = None,
    runtimes: Sequence[str] | None = None,
    target_ci: float | None = None,
    max_minutes: float | None = None,
    fidelity_file: str | None = None,
) -> ContentionConfig:
    """Load ``path`` with ``--set`` overrides, then ``--quick``, ``--repeats``, ``--runtimes``,
    ``--target-ci``, ``--max-minutes`` and ``--fidelity FILE`` on top.

    ``--repeats R`` asks for exactly R repeats, so it also lifts the file's ``max_minutes`` unless
    ``--max-minutes`` is given too; ``--target-ci`` without ``--repeats`` repeats until the target.
    Raises ``ConfigError`` listing every problem (including runtimes that are not installed).
    """
    config = load_config(ContentionConfig, path, overrides)
    settings = config.contention
    if quick:
        q = settings.quick
        settings = settings.model_copy(
            update={
                "runtimes": list(q.runtimes),
                "repeats": q.repeats,
                "steps_per_condition": q.steps_per_condition,
                "together_trials": q.together_trials,
                "timebox": settings.timebox.model_copy(update={"budget_s": q.budget_s}),
            }
        )
    updates: dict[str, object] = {}
    if repeats is not None:
        updates.update(repeats=repeats, max_minutes=None)
    if target_ci is not None:
        updates["target_ci"] = target_ci
        if repeats is None:
            updates["repeats"] = None
    if max_minutes is not None:
        updates["max_minutes"] = max_minutes
    if runtimes is not None:
        updates["runtimes"] = list(runtimes)
    if fidelity_file is not None:
        updates["fidelity"] = settings.fidelity.model_copy(update={"file": fidelity_file})
    settings = settings.model_copy(update=updates)  # checked below, with every other problem
    config = config.model_copy(update={"contention": settings})
    problems = contention_problems(config)
    if problems:
        raise ConfigError(problems, source=str(path))
    return config


def contention_problems(config: ContentionConfig) -> list[str]:
    """Every reason this experiment cannot run as configured; empty when it can."""
    s = config.contention
    problems = []
    if s.repeats is not None and s.repeats < 2:
        problems.append(f"contention.repeats: {s.repeats}; a confidence interval needs at least 2 repeats")
    if s.target_ci is not None and s.target_ci <= 0:
        problems.append(f"contention.target_ci: {s.target_ci}; give a half-width share above 0, e.g. 0.10")
    if s.max_minutes is not None and s.max_minutes <= 0:
        problems.append(f"contention.max_minutes: {s.max_minutes}; give a budget above 0 minutes, e.g. 60")
    if s.repeats is None and s.target_ci is None:
        problems.append(
            "contention.repeats: null needs contention.target_ci (repeat until what?); set a number "
            "of repeats or a target, e.g. --target-ci 0.10"
        )
    if s.repeats is None and s.max_minutes is None:
        problems.append(
            "contention.max_minutes: not set, so a target out of reach would repeat forever; give a "
            "budget, e.g. --max-minutes 60"
        )
    if not s.runtimes:
        problems.append("contention.runtimes: empty; name at least the baseline, e.g. [eager, native]")
    if len(set(s.runtimes)) != len(s.runtimes):
        problems.append(f"contention.runtimes: {s.runtimes} names a runtime twice; list each once")
    if s.baseline not in s.runtimes:
        problems.append(
            f"contention.baseline: {s.baseline!r} is not in contention.runtimes {s.runtimes}; "
            "add it (freed capacity is measured against it)"
        )
    variant_problems, bad_variants = _variant_problems(config)
    problems += variant_problems
    problems += check_runtimes([config.runtime_of(name) for name in s.runtimes if name not in bad_variants])
    if config.loop.placement.preset != "shared":
        problems.append(
            "loop.placement.preset: the contention experiment measures one shared pool; "
            "set it to shared (split pools do not contend)"
        )
    if config.loop.ray.address is not None:
        problems.append(
            "loop.ray.address: pool time is measured from this machine's process and kernel "
            "accounting, so the experiment starts its own local Ray; remove ray.address"
        )
    problems += _role_problems(config)
    faults = config.loop.faults
    injected = (faults.kill_scorer_steps, faults.kill_http_server_steps, faults.stall_http_server_steps)
    if any(injected) or faults.kill_rollout_step is not None:
        problems.append(
            "loop.faults: the contention experiment injects no faults (a restart would distort "
            "the figures); remove loop.faults"
        )
    problems += [f"loop: {p}" for p in cross_field_problems(config.loop, [config.runtime_of(n) for n in s.runtimes])]
    problems += fidelity_problems(config)
    return problems


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``update``'s keys over it, nested dicts merged key by key."""
    out = dict(base)
    for key, value in update.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _variant_problems(config: ContentionConfig) -> tuple[list[str], set[str]]:
    """Variants named like a runtime, left unused, or whose settings make no valid reward section; and the names
    of the last kind (their runtime is not checked again)."""
    s, problems, bad = config.contention, [], set()
    used = [config.runtime_of(name) for name in s.runtimes]
    base = set(cross_field_problems(config.loop, used))
    for name, overrides in s.variants.items():
        where = f"contention.variants.{name}"
        if name in SCORERS:
            problems.append(f"{where}: {name!r} is a runtime's name; give the variant a name of its own")
        if name not in s.runtimes:
            problems.append(f"{where}: not in contention.runtimes {s.runtimes}; add it or remove the variant")
        try:
            reward = config.reward_for(name)
        except ValidationError as err:
            problems += [f"{where}: {describe_error(e)}" for e in err.errors()]
            bad.add(name)
            continue
        run = config.loop.model_copy(update={"reward": reward})
        own = [p for p in cross_field_problems(run, used) if p not in base]  # the loop's own are reported below
        problems += [f"{where}: {p}" for p in own]
        if "runtime" not in overrides:
            problems.append(f"{where}: name its runtime (runtime: ...), so the comparison says what it compares")
    return problems, bad


def _role_problems(config: ContentionConfig) -> list[str]:
    """PPO's roles each need a process of their own (per-role core-seconds come from process
    accounting), and the async pipeline has no reference or critic stage."""
    problems = []
    if config.loop.placement.colocate:
        problems.append(
            "loop.placement.colocate: the experiment measures each role's core-seconds on its own "
            "process, and colocated roles share one; remove loop.placement.colocate"
        )
    experience = [r for r in run_roles(config.loop) if r in EXPERIENCE_ROLES]
    if config.is_async and experience:
        problems.append(
            f"loop.schedule: async has no {' or '.join(experience)} stage (the async pipeline trains "
            "GRPO/RLOO batches); set loop.trainer.algorithm: grpo and loop.kl.coef: 0, or loop.schedule: "
            "overlapped for the PPO step"
        )
    return problems
