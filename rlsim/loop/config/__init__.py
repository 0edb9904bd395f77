"""The ``rlsim run`` config: YAML validated into typed models (unknown keys are errors), every error at once.

Sections: ``policy`` (generation), ``workload`` (prompts, group size, response lengths), ``reward``
(scoring runtime, replicas, batcher), ``trainer`` (GRPO/RLOO/PPO update, weight sync), ``kl``,
``reference`` and ``critic`` (rlsim.loop.config.algorithm), ``placement`` (cores,
threads, GPU share per actor; presets ``shared``/``split``), ``ray`` (local or an existing cluster).
Cross-field rules (prompt + response must fit the context, split needs two cores, ...) are checked
here too, so nothing starts on a config that cannot run.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, ValidationInfo, field_validator, model_validator

from rlsim.batching import BATCHERS, batcher_names
from rlsim.config_loader import load_config
from rlsim.errors import ConfigError, RlsimError
from rlsim.loop.config.algorithm import CriticConfig, KlConfig, ReferenceConfig, algorithm_problems
from rlsim.loop.config.asynchronous import AsyncConfig, async_problems
from rlsim.loop.config.conventions import TrainerConventions, apply_preset, convention_problems
from rlsim.loop.deadline import PhaseTimeouts
from rlsim.placement import ALL_ROLES, ActorPlacement, PlacementConfig, resolve_placement
from rlsim.registry import import_modules
from rlsim.rewards.options import (
    DAY_S,
    OPTIONS,
    FunctionOptions,
    GenrmOptions,
    OnTimeout,
    RemoteOptions,
    SandboxOptions,
)
from rlsim.rollout.prompts import max_prompt_tokens, max_response_tokens
from rlsim.schedule_kinds import ScheduleName
from rlsim.scoring import SCORERS, unavailable_reason
from rlsim.scoring.base import ScorerSettings, int8_setting_problems
from rlsim.scoring.int8_options import DEFAULT_CALIBRATION, int8_option_problems
from rlsim.workloads import LognormalLengths, WorkloadSpec

WEEK_S = 7 * 86400.0  # the longest any deadline or simulated wait may be: longer ones overflow the waits they reach


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PolicyConfig(_Strict):
    """The policy and its generation engine. ``backend``: ``vllm``, ``hf`` (Hugging Face generate) or
    ``auto`` (vLLM where it can be imported, else hf; results say which ran). ``kv_cache_gib``: vLLM's
    CPU KV cache (GiB). ``engine_process``: ``separate`` (vLLM's default: its engine core and its worker are
    two processes it spawns beside the rollout actor) or ``inline`` (both run inside the rollout actor's own
    process: no two interpreters to start, about 25 s less per engine start on 2 cores; a crash of the
    engine is then a crash of the actor)."""

    model: str = "tiny-llama"
    backend: Literal["vllm", "hf", "auto"] = "vllm"
    device: Literal["cpu", "cuda"] = "cpu"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    max_model_len: int = Field(512, ge=16)
    kv_cache_gib: float = Field(1.0, gt=0)
    enforce_eager: bool = True
    engine_process: Literal["separate", "inline"] = "separate"
    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)


class WorkloadConfig(_Strict):
    """``prompts_per_step`` prompts, each sampled ``group_size`` times; lengths/prompts from ``spec``."""

    prompts_per_step: int = Field(8, ge=1)
    group_size: int = Field(4, ge=2, description="GRPO group: samples per prompt (>= 2 to compare within a group)")
    spec: WorkloadSpec = Field(default_factory=lambda: WorkloadSpec(response=LognormalLengths(mean=64, max=192)))


class RewardConfig(_Strict):
    """Scoring: ``runtime`` (a registered scoring runtime: eager, ort, native, http, ...) x ``replicas`` actors,
    batches planned by ``batcher`` (a registered batcher: fixed, sorted, token-budget).
    ``imports``: user modules imported first (here and in every scoring actor) that register plug-in
    runtimes with ``@register_scorer``; ``rlsim run --import MODULE`` adds to it.
    For ``http`` each scoring actor starts an ``rlsim serve`` process on loopback wrapping ``server_runtime``,
    or, with ``url``, scores with the reward server there; ``http_protocol`` is what that server speaks
    (``rlsim``, ``openrlhf`` or ``vllm-classify``, see ``rlsim.scoring.http_protocols``);
    ``http_deadline_s``: the longest one batch may take over HTTP, retries included (seconds).
    ``http`` (``RemoteOptions``): how the http runtime calls its server: requests in flight, requests per
    minute, a per-attempt timeout, retries with backoff, and ``on_timeout`` for a request still unanswered.
    ``function`` / ``sandbox`` / ``genrm``: the settings of those runtimes (rewards that are no model: a Python
    verifier in a worker pool, code run in a sandbox, a judge LLM on vLLM; rlsim.rewards.options); ``model`` is
    then not used.
    ``int8_calibration`` / ``int8_smooth_alpha``: how the calibrated int8 runtimes build their graphs (the range
    method of ``*-int8-static``; SmoothQuant's alpha for ``*-int8-static`` and ``*-int8-mixed``, None: no smoothing),
    ``rlsim.scoring.int8_options``; other runtimes ignore them.
    ``on_timeout`` / ``default_reward``: when set, the running runtime's section takes them (``default``: the
    rollout gets ``default_reward``, counted; ``drop``: its group is left out of the update, counted; ``fail``:
    the step fails), for any reward that can time out (http, function, sandbox)."""

    imports: list[str] = Field(default_factory=list)  # first: validators run in field order
    model: str = "minilm-rm"
    runtime: str = "eager"
    replicas: int = Field(1, ge=1)
    batcher: str = "sorted"
    batch_size: int | None = Field(16, ge=1)
    token_budget: int | None = Field(None, ge=1)
    max_length: int | None = Field(256, ge=8)
    device: Literal["cpu", "cuda"] = "cpu"
    spinning: bool = True
    engine_process: Literal["separate", "inline"] = Field(
        "separate", description="vllm runtime: its engine's processes, as policy.engine_process"
    )
    server_runtime: str = "ort"
    http_deadline_s: FiniteFloat = Field(60.0, gt=0, le=DAY_S)
    http_protocol: Literal["rlsim", "openrlhf", "vllm-classify"] = "rlsim"
    int8_calibration: str = DEFAULT_CALIBRATION
    int8_smooth_alpha: float | None = None
    url: str | None = Field(None, min_length=1, description="http: a running reward server (e.g. http://host:8000)")
    http: RemoteOptions = Field(default_factory=RemoteOptions)
    function: FunctionOptions = Field(default_factory=FunctionOptions)
    sandbox: SandboxOptions = Field(default_factory=SandboxOptions)
    genrm: GenrmOptions = Field(default_factory=GenrmOptions)
    on_timeout: OnTimeout | None = None
    default_reward: FiniteFloat | None = None

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} is not an http:// or https:// URL")
        return v

    @field_validator("int8_calibration", "int8_smooth_alpha", mode="before")
    @classmethod
    def _int8_option(cls, v: object, info: ValidationInfo) -> object:
        name = str(info.field_name)
        given = {"int8_calibration": DEFAULT_CALIBRATION, "int8_smooth_alpha": None, name: v}
        problems = int8_option_problems(given["int8_calibration"], given["int8_smooth_alpha"])
        if problems:
            raise ValueError(problems[0].removeprefix(f"{name}: "))
        return v

    @field_validator("imports")
    @classmethod
    def _import_plugins(cls, v: list[str]) -> list[str]:
        try:
            import_modules(v, "reward.imports")
        except RlsimError as err:
            raise ValueError(str(err)) from None
        return v

    @field_validator("runtime")
    @classmethod
    def _known_runtime(cls, v: str) -> str:
        if v not in SCORERS:
            if SCORERS.refusal(v):
                raise ValueError(SCORERS.unknown_message(v))
            raise ValueError(f"unknown runtime; valid names: {SCORERS.valid_names()} (a plug-in needs reward.imports)")
        reason = unavailable_reason(v, device=None)  # the hardware is checked with ``device`` (declared later)
        if reason:
            raise ValueError(reason)
        return v

    @model_validator(mode="after")
    def _runtime_runs_on_device(self) -> RewardConfig:
        # e.g. eager-fp16 on cpu, or eager-bf16 on a CPU without bf16 instructions
        reason = SCORERS.info(self.runtime).hardware_reason(self.runtime, self.device)
        if reason:
            raise ValueError(reason)
        return self

    @field_validator("batcher")
    @classmethod
    def _known_batcher(cls, v: str) -> str:
        offline = batcher_names()
        if v in BATCHERS and v not in offline:
            raise ValueError(f"{v} is an online batcher (for `rlsim serve`); valid names here: {', '.join(offline)}")
        if v not in BATCHERS:
            raise ValueError(f"unknown batcher; valid names: {', '.join(offline)}")
        return v

    @field_validator("server_runtime")
    @classmethod
    def _known_server_runtime(cls, v: str) -> str:
        valid = [e.name for e in SCORERS.entries() if not e.info.server]
        if v not in valid:
            raise ValueError(f"the http runtime's server wraps an in-process runtime; valid names: {', '.join(valid)}")
        return v

    @model_validator(mode="after")
    def _timeout_choice_to_section(self) -> RewardConfig:
        """``reward.on_timeout`` / ``default_reward`` go to the running runtime's section (one place to read)."""
        given = {k: getattr(self, k) for k in ("on_timeout", "default_reward") if getattr(self, k) is not None}
        if not given:
            return self
        if self.runtime not in OPTIONS:
            names = ", ".join(OPTIONS)
            raise ValueError(f"reward.{next(iter(given))} applies to rewards that can time out ({names}), "
                             f"not to runtime {self.runtime}, which scores in process")  # fmt: skip
        section: BaseModel = getattr(self, self.runtime)
        for key, value in given.items():
            if key not in type(section).model_fields:
                raise ValueError(f"reward.{key} does not apply to runtime {self.runtime} (it has no per-call deadline)")
            if key in section.model_fields_set and getattr(section, key) != value:
                raise ValueError(
                    f"reward.{key} ({value}) and reward.{self.runtime}.{key} ({getattr(section, key)}) disagree; "
                    "set one of them"
                )
            setattr(section, key, value)
        return self

    def options(self) -> dict[str, Any]:
        """The settings section of this runtime (``function``, ``sandbox``) as a plain dict; empty for a model.
        ``http`` with ``limits: shared``: each replica's share of the limits (``RemoteOptions``)."""
        if self.runtime not in OPTIONS:
            return {}
        section: BaseModel = getattr(self, self.runtime)  # the field named like the runtime
        out = section.model_dump()
        if self.runtime == "http" and out["limits"] == "shared":
            out["concurrency"] //= self.replicas
            if out["requests_per_minute"] is not None:
                out["requests_per_minute"] /= self.replicas
        return out

    @model_validator(mode="after")
    def _shared_limits_split(self) -> RewardConfig:
        h = self.http
        if self.runtime == "http" and h.limits == "shared" and h.concurrency < self.replicas:
            raise ValueError(
                f"reward.http.limits shared splits concurrency {h.concurrency} over {self.replicas} replicas, "
                "which leaves some with none; raise reward.http.concurrency to at least reward.replicas, "
                "or use fewer replicas"
            )
        return self

    def section_problems(self, runtimes: Collection[str] = ()) -> list[str]:
        """A runtime's section set while neither this runtime nor any of ``runtimes`` (the others a contention
        experiment compares) scores with it: it would be ignored without a word."""
        running = {self.runtime, *runtimes}
        return [
            f"reward.{name}: applies to reward.runtime: {name} (it is {self.runtime})"
            for name in OPTIONS
            if name in self.model_fields_set and name not in running
        ]

    def sizing_problems(self) -> list[str]:
        """The setting the batcher's registry entry says it is sized by, if missing (a cross-field rule)."""
        sizing = BATCHERS.info(self.batcher).sizing
        if sizing == "budget" and self.token_budget is None:
            return [f"reward.token_budget: the {self.batcher} batcher needs a budget (padded tokens per batch)"]
        if sizing == "size" and self.batch_size is None:
            return [f"reward.batch_size: the {self.batcher} batcher needs a batch size (sequences per batch)"]
        return []


class TrainerConfig(TrainerConventions, _Strict):
    """The update and weight sync (the step's conventions: rlsim.loop.config.conventions). ``algorithm``:
    ``grpo`` (group-normalised advantages), ``rloo``
    (leave-one-out baseline) or ``ppo`` (a critic, GAE with ``gamma`` and ``lam``, the critic's loss
    clipped at ``value_clip`` and its own AdamW at ``critic_lr``). ``sync``: ``auto`` reloads into the
    engine and falls back to a simulated cost of ``simulated_sync_s`` seconds if that fails; ``reload``
    fails instead; ``simulated`` always sleeps that long in the rollout actor (blocking it, as a real
    sync would)."""

    algorithm: Literal["grpo", "ppo", "rloo"] = "grpo"
    gamma: float = Field(1.0, ge=0, le=1)
    lam: float = Field(0.95, ge=0, le=1)
    value_clip: float | None = Field(0.2, gt=0)
    critic_lr: float = Field(1e-5, gt=0)

    lr: float = Field(1e-6, gt=0)
    clip_eps: float = Field(0.2, gt=0, lt=1)
    epochs: int = Field(1, ge=1)
    micro_batch: int = Field(16, ge=1)
    max_grad_norm: float = Field(1.0, gt=0)
    normalize_std: bool = True
    device: Literal["cpu", "cuda"] = "cpu"
    sync: Literal["auto", "reload", "simulated"] = "auto"
    simulated_sync_s: FiniteFloat = Field(0.5, ge=0, le=WEEK_S)


class RayConfig(_Strict):
    """``address`` None: start Ray in this process; ``auto`` or ``HOST:PORT``: join that cluster."""

    address: str | None = None
    num_cpus: int | None = Field(None, ge=1)
    start_timeout_s: FiniteFloat = Field(300.0, gt=0, le=WEEK_S)


class FaultsConfig(_Strict):
    """Faults injected on purpose, to show the loop survives them, and the deadlines that keep a stalled
    actor from hanging a run. ``kill_scorer_steps``: steps in which scorer-0 is killed right after its
    first micro-batch is sent (Ray restarts it and the driver sends its unscored batches again);
    ``kill_rollout_step``: the step in which the rollout actor is killed during generation (the run stops
    with an error, completed steps stay on disk, and it says how to resume). ``scorer_restarts``:
    restarts Ray allows a scorer; ``score_attempts``: sends per batch before giving up.

    With ``reward.runtime: http``: ``kill_http_server_steps``: steps in which scorer-0's server is
    killed (SIGKILL) just before its first micro-batch; the reward stage starts a new server and scores
    the batch again, so every rollout is still scored once (survived). ``stall_http_server_steps``:
    steps in which that server is frozen (SIGSTOP) instead, for ``http_stall_s`` seconds (None: until
    the client gives up). A stall shorter than ``reward.http_deadline_s`` is survived (the answer comes
    late); a longer one fails the step with the client's deadline error (injected, not survived).

    Deadlines (seconds): ``score_timeout_s``: longest wait for any scoring batch to finish;
    ``generate_timeout_s``: a step's whole generation; ``update_timeout_s``: the trainer's update;
    ``sync_timeout_s``: the weight sync (export + reload, or the simulated cost); ``warmup_timeout_s``:
    the warm-up before step 1; ``probe_timeout_s``: reading each actor's CPU seconds around a step.
    Past one, the step fails with an error naming the phase and the setting to raise (completed steps
    stay on disk; ``--resume`` may raise a deadline). Defaults are about 100x what the default config's
    phases take on 2 cores, so only a stall meets them."""

    kill_scorer_steps: list[int] = Field(default_factory=list)
    kill_rollout_step: int | None = Field(None, ge=1)
    kill_http_server_steps: list[int] = Field(default_factory=list)
    stall_http_server_steps: list[int] = Field(default_factory=list)
    # Every deadline is finite and at most a week: infinity or 1e300 would overflow the waits they reach.
    http_stall_s: FiniteFloat | None = Field(None, gt=0, le=WEEK_S)
    scorer_restarts: int = Field(2, ge=0)
    score_attempts: int = Field(3, ge=1)
    score_timeout_s: FiniteFloat = Field(600.0, gt=0, le=WEEK_S)
    generate_timeout_s: FiniteFloat = Field(1800.0, gt=0, le=WEEK_S)
    update_timeout_s: FiniteFloat = Field(1800.0, gt=0, le=WEEK_S)
    sync_timeout_s: FiniteFloat = Field(900.0, gt=0, le=WEEK_S)
    warmup_timeout_s: FiniteFloat = Field(1800.0, gt=0, le=WEEK_S)
    probe_timeout_s: FiniteFloat = Field(120.0, gt=0, le=WEEK_S)

    def phase_timeouts(self) -> PhaseTimeouts:
        return PhaseTimeouts(
            self.generate_timeout_s,
            self.update_timeout_s,
            self.sync_timeout_s,
            self.warmup_timeout_s,
            self.probe_timeout_s,
        )


class RunConfig(_Strict):
    """One ``rlsim run``: ``steps`` GRPO steps with the ``schedule`` (``sequential``, ``overlapped`` or ``async``:
    generation runs ahead of training within ``async.max_staleness``, rlsim.loop.schedules.asynchronous.pipeline)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    steps: int = Field(3, ge=1)
    seed: int = 0
    schedule: ScheduleName = "overlapped"  # an entry of rlsim.schedule_kinds.SCHEDULES
    micro_batch: int = Field(8, ge=1, description="overlapped: rollouts per micro-batch streamed to the scorers")
    warmup: bool = True
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    kl: KlConfig = Field(default_factory=KlConfig)
    reference: ReferenceConfig = Field(default_factory=ReferenceConfig)
    critic: CriticConfig = Field(default_factory=CriticConfig)
    placement: PlacementConfig = Field(default_factory=PlacementConfig)
    ray: RayConfig = Field(default_factory=RayConfig)
    faults: FaultsConfig = Field(default_factory=FaultsConfig)
    async_: AsyncConfig = Field(default_factory=AsyncConfig, alias="async")

    @model_validator(mode="before")
    @classmethod
    def _fill_from_preset(cls, data: Any) -> Any:
        return apply_preset(data)  # trainer.conventions: the preset's values for every key left unset


def load_run_config(path: str | Path, overrides: Sequence[str] = ()) -> RunConfig:
    """Load and validate ``path`` with ``--set`` overrides; raises ``ConfigError`` listing every problem."""
    config = load_config(RunConfig, path, overrides)
    problems = cross_field_problems(config)
    if problems:
        raise ConfigError(problems, source=str(path))
    return config


def cross_field_problems(config: RunConfig, runtimes: Collection[str] = ()) -> list[str]:
    """Rules that involve several settings (or this machine, for a local run); empty when all hold. ``runtimes``:
    the other scoring runtimes that will run this config (a contention experiment's), whose sections are used."""
    problems = []
    spec = config.workload.spec
    longest = (max_prompt_tokens(spec) or 0) + max_response_tokens(spec)
    if longest > config.policy.max_model_len:
        problems.append(
            f"workload.spec: prompt + response can reach {longest} tokens, more than policy.max_model_len "
            f"({config.policy.max_model_len}); lower the length maxima or raise max_model_len"
        )
    problems += config.reward.sizing_problems()
    problems += config.reward.section_problems(runtimes)
    if config.placement.rollout.gpu > 0 and config.policy.device != "cuda":
        problems.append("placement.rollout.gpu: a GPU share needs policy.device: cuda")
    if config.placement.scorer.gpu > 0 and config.reward.device != "cuda":
        problems.append("placement.scorer.gpu: a GPU share needs reward.device: cuda")
    if config.placement.trainer.gpu > 0 and config.trainer.device != "cuda":
        problems.append("placement.trainer.gpu: a GPU share needs trainer.device: cuda")
    if config.faults.kill_scorer_steps and config.faults.scorer_restarts == 0:
        problems.append("faults.kill_scorer_steps: a killed scorer needs faults.scorer_restarts >= 1 to come back")
    problems += _fault_problems(config)
    problems += algorithm_problems(config)
    problems += async_problems(config)
    problems += convention_problems(config)
    problems += _placement_problems(config)
    return problems


def _fault_problems(config: RunConfig) -> list[str]:
    f, problems = config.faults, []
    http_faults = [k for k in ("kill_http_server_steps", "stall_http_server_steps") if getattr(f, k)]
    for key in ("url", "http_protocol"):
        if getattr(config.reward, key) not in (None, "rlsim") and config.reward.runtime != "http":
            problems.append(f"reward.{key}: applies to reward.runtime: http only (it is {config.reward.runtime})")
    r = config.reward
    int8 = ScorerSettings(int8_calibration=r.int8_calibration, int8_smooth_alpha=r.int8_smooth_alpha)  # type: ignore[arg-type]
    problems += int8_setting_problems(int8, [r.runtime], where="reward.")
    if http_faults and config.reward.url is not None:
        problems.append(
            f"faults.{http_faults[0]}: server faults act on the server the http runtime starts; leave reward.url unset"
        )
    if http_faults and config.reward.runtime != "http":
        problems.append(
            f"faults.{http_faults[0]}: http server faults need reward.runtime: http "
            f"(it is {config.reward.runtime}, which runs no server)"
        )
    lists = {k: set(getattr(f, k)) for k in ("kill_scorer_steps", "kill_http_server_steps", "stall_http_server_steps")}
    for a, b in [
        ("kill_scorer_steps", "kill_http_server_steps"),
        ("kill_scorer_steps", "stall_http_server_steps"),
        ("kill_http_server_steps", "stall_http_server_steps"),
    ]:
        if lists[a] & lists[b]:
            problems.append(
                f"faults: step {min(lists[a] & lists[b])} is in both {a} and {b}; inject one scorer fault per step"
            )
    for k, steps in lists.items():
        if steps and min(steps) < 1:
            problems.append(f"faults.{k}: steps are numbered from 1")
    return problems


def _placement_problems(config: RunConfig) -> list[str]:
    local = config.ray.address is None
    available = sorted(os.sched_getaffinity(0))
    problems = []
    pool = config.placement.pool
    if local and pool and set(pool) - set(available):
        problems.append(
            f"placement.pool: cores {sorted(set(pool) - set(available))} are not available here "
            f"(this machine offers {available})"
        )
    for role in ALL_ROLES:
        p: ActorPlacement = getattr(config.placement, role)
        if local and p.cores and set(p.cores) - set(available):
            problems.append(
                f"placement.{role}.cores: {sorted(set(p.cores) - set(available))} not available here "
                f"(this machine offers {available})"
            )
        if p.threads and p.cores and p.threads > len(p.cores):
            problems.append(
                f"placement.{role}.threads: {p.threads} threads on {len(p.cores)} pinned cores; "
                "give more cores or fewer threads"
            )
    if not problems:
        try:
            resolve_placement(config.placement, pool or available)
        except ValueError as err:
            problems.append(f"placement: {err}")
    return problems
