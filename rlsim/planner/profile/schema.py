"""The versioned JSON profile: what the simulation knows about one kind of hardware.

A profile is measured on small hardware (``rlsim profile``) and read by the planner. It holds, per
hardware kind:

- per scoring runtime, a latency model ``latency_s = a + b x batch + c x padded_tokens`` fitted by
  least squares, with its residuals (``ScorerLatencyModel``);
- the generation step time of one continuous-batching engine as a function of running sequences
  and units (cores or GPUs), fitted from measured points that are kept beside the curve;
- update and weight-sync cost per generated token (plus a fixed part);
- the contention slowdowns measured when generation and scoring share the same units;
- optionally (``roles``), the forward and training costs of PPO's reference and critic.

Units: times in seconds, sizes in tokens or sequences, "units" are CPU cores or GPUs depending on
the model's ``device``. ``schema_version`` is what decides whether a profile can be read: another
schema is refused with one message naming the fix (re-measure), because the meaning of its fields
changed. A profile of the same schema written by another rlsim release is read, with a one-line note.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

import rlsim
from rlsim.errors import ConfigError, RlsimError
from rlsim.io import atomic_write_json, read_user_text
from rlsim.planner.profile.scaling import DataParallel, ParallelScaling, RewardFunctionModel
from rlsim.planner.profile.sources import NumberSource, Source

# Bump when a field is removed, becomes required or changes meaning; an optional new field with a default
# (``machine``) leaves older profiles readable. The package version alone never refuses a profile.
SCHEMA_VERSION = 1
Device = Literal["cpu", "cuda"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LatencySample(_Strict):
    """One measured scorer call: ``batch`` sequences padded to ``padded_tokens`` in all, on ``units``.
    ``foreign_share``: share of all cores' time other programs took during the call (None: unknown)."""

    batch: int = Field(ge=1)
    padded_tokens: int = Field(ge=1)
    latency_s: float = Field(gt=0)
    units: float = Field(gt=0)
    foreign_share: float | None = Field(default=None, ge=0, le=1)


class FitStats(_Strict):
    """How well a fitted model explains its samples; residuals are relative (measured/predicted - 1)."""

    n_samples: int = Field(ge=0)
    r2: float
    residual_rel_std: float = Field(ge=0)
    residual_rel_max: float = Field(ge=0)


class ScorerLatencyModel(_Strict):
    """Latency of one forward pass of a scorer replica holding ``units`` cores/GPUs.

    ``latency_s(batch, padded, u) = a + (b x batch + c x padded) x (units / u) ** alpha``: the
    fixed part ``a`` (call overhead) does not shrink with more units, the compute part does.
    """

    device: Device
    units: float = Field(gt=0, description="cores (cpu) or GPUs (cuda) the samples were measured on")
    intercept_s: float = Field(ge=0)
    per_sequence_s: float = Field(ge=0)
    per_padded_token_s: float = Field(ge=0)
    unit_exponent: float = Field(default=1.0, ge=0, le=1.5)
    unit_exponent_measured: bool = False
    max_length: int = Field(ge=1, description="tokens the reward model truncates each text to")
    fit: FitStats
    samples: list[LatencySample] = Field(default_factory=list)
    in_loop_factor: float = Field(
        default=1.0,
        gt=0,
        description=(
            "scoring inside the RL loop takes this many times the benchmarked latency (decoding the policy's "
            "tokens to text, re-tokenizing, cold caches after generation and update); fitted to loop runs"
        ),
    )
    in_loop_factor_measured: bool = False
    call_overhead_s: float = Field(
        default=0.0,
        ge=0,
        description=(
            "seconds each scoring call of the loop costs on top of its batches (round-robin dispatch); fitted "
            "with in_loop_factor"
        ),
    )
    pads: bool = Field(
        default=True,
        description=(
            "false: the runtime schedules the rows itself with no padding (vLLM's pooling runner), so a batch "
            "costs its real tokens, and per_padded_token_s is per real token"
        ),
    )

    def batch_tokens(self, lengths: np.ndarray) -> int:
        """The tokens a batch of texts ``lengths`` long costs: count x longest, or their sum without padding."""
        if not len(lengths):
            return 0
        return int(len(lengths) * lengths.max()) if self.pads else int(lengths.sum())

    def latency_s(self, batch: float, padded_tokens: float, units: float) -> float:
        """Predicted seconds for one batch on a replica with ``units`` cores/GPUs."""
        scale = (self.units / units) ** self.unit_exponent
        return self.intercept_s + (self.per_sequence_s * batch + self.per_padded_token_s * padded_tokens) * scale


class UpdateSample(LatencySample):
    """One timed policy update of ``batch`` sequences: ``response_tokens`` of them are the ones the
    loss (and the vocabulary projection, most of a small model's compute) runs on."""

    response_tokens: int = Field(ge=1)


class UpdateCostModel(_Strict):
    """The policy trainer's forward and backward of one micro-batch, alone on ``units``, without the
    optimizer step (``RolesModel.optimizer_step_s``, taken off each timed call before the fit):
    ``a + (r x response tokens + c x padded tokens) x (units / u) ** alpha``. The response term is the
    trainer's vocabulary projection and loss, which run on response positions only
    (``rlsim.loop.roles.packing.response_logprobs``); the padded term the transformer itself."""

    device: Device
    units: float = Field(gt=0)
    intercept_s: float = Field(ge=0)
    per_response_token_s: float = Field(ge=0)
    per_padded_token_s: float = Field(ge=0)
    unit_exponent: float = Field(default=1.0, ge=0, le=1.5)
    unit_exponent_measured: bool = False
    fit: FitStats
    samples: list[UpdateSample] = Field(default_factory=list)

    def latency_s(self, response_tokens: float, padded_tokens: float, units: float) -> float:
        scale = (self.units / units) ** self.unit_exponent
        return (
            self.intercept_s
            + (self.per_response_token_s * response_tokens + self.per_padded_token_s * padded_tokens) * scale
        )


class GenerationPoint(_Strict):
    """A measured steady state: ``running`` sequences decoding on ``units`` gave ``tokens_per_s``."""

    running: float = Field(gt=0)
    units: float = Field(gt=0)
    tokens_per_s: float = Field(gt=0)
    source: str = ""


class GenerationModel(_Strict):
    """Decode-iteration time of one continuous-batching engine.

    One iteration emits one token for each of ``n`` running sequences and takes
    ``base_s x (units / u) ** base_exponent + per_seq_s x n x (units / u) ** unit_exponent`` seconds
    on an engine of ``u`` units (``base_exponent`` None: the same as ``unit_exponent``). The fixed part
    of an iteration (scheduling, sampling set-up: mostly single-threaded) need not speed up with cores
    the way the per-sequence compute does. Admitting a sequence adds ``prefill_s_per_token`` per
    prompt token to that iteration.
    """

    device: Device
    units: float = Field(gt=0, description="units per engine the curve was measured on")
    base_s: float = Field(ge=0)
    per_seq_s: float = Field(ge=0)
    prefill_s_per_token: float = Field(default=0.0, ge=0)
    unit_exponent: float = Field(default=1.0, ge=0, le=1.5)
    base_exponent: float | None = Field(default=None, ge=0, le=1.5)
    unit_exponent_measured: bool = False
    max_running: int = Field(ge=1, description="sequences one engine of `units` holds at once (KV cache)")
    host_cores_per_unit: float = Field(default=0.0, ge=0, description="CPU cores a GPU engine keeps busy")
    fit: FitStats
    points: list[GenerationPoint] = Field(default_factory=list)
    parallel: ParallelScaling | None = Field(
        default=None,
        description=("multi-GPU engines (tensor/pipeline parallel); `units` must then be 1 (the curve is one GPU's)"),
    )

    def step_s(self, running: float, units: float) -> float:
        """Seconds per decode iteration with ``running`` sequences on ``units`` (0 when none run)."""
        if running <= 0:
            return 0.0
        base_scale, seq_scale = self.scales(units)
        return self.base_s * base_scale + self.per_seq_s * running * seq_scale

    def iteration_s(self, running: np.ndarray, units: float, tp: int = 1, pp: int = 1) -> np.ndarray:
        """Seconds per decode iteration for each entry of ``running`` (0 where none run) on an engine
        of ``units`` units; ``tp`` x ``pp`` > 1 needs ``parallel`` and means ``units`` = tp x pp GPUs."""
        if tp * pp > 1:
            if self.parallel is None:
                raise ValueError("a multi-GPU engine needs the profile's generation.parallel scaling")
            step = self.parallel.iteration_s(self.base_s, self.per_seq_s, running, tp, pp)
        else:
            base_scale, seq_scale = self.scales(units)
            step = self.base_s * base_scale + self.per_seq_s * running * seq_scale
        return np.where(running > 0, step, 0.0)

    def scales(self, units: float) -> tuple[float, float]:
        """Factors on the fixed and the per-sequence parts of an iteration on ``units`` units."""
        ratio = self.units / units
        base = self.unit_exponent if self.base_exponent is None else self.base_exponent
        return ratio**base, ratio**self.unit_exponent


class TrainerModel(_Strict):
    """PPO/GRPO update and weight sync, per step, measured on ``units`` training units.

    ``update_s = update_fixed_s + (update_s_per_token x tokens + update_s_per_sequence x sequences)
    x (units / u) ** unit_exponent`` (data-parallel over u units; exponent 1 = perfect scaling; the
    per-sequence part is what does not grow with response length: the prompt's forward and backward,
    padding, per-sequence bookkeeping); ``sync_s = sync_fixed_s +
    sync_s_per_token x tokens``. ``step_overhead_s`` is the orchestration time a real step spends
    outside every phase (the loop's "idle").
    """

    units: float = Field(gt=0)
    update_fixed_s: float = Field(default=0.0, ge=0)
    update_s_per_token: float = Field(ge=0)
    update_s_per_sequence: float = Field(default=0.0, ge=0)
    unit_exponent: float = Field(default=1.0, ge=0, le=1.5)
    sync_fixed_s: float = Field(default=0.0, ge=0)
    sync_s_per_token: float = Field(default=0.0, ge=0)
    step_overhead_s: float = Field(default=0.0, ge=0)
    update_s_per_prompt_token: float = Field(
        default=0.0,
        ge=0,
        description=(
            "seconds per prompt token (forward and backward of the prompt, which a GPU trainer pays per token)"
        ),
    )
    data_parallel: DataParallel | None = None

    def update_s(
        self, tokens: float, units: float, sequences: float = 0.0, prompt_tokens: float = 0.0, nodes: int = 1
    ) -> float:
        """Seconds of one update on ``tokens`` generated tokens in ``sequences`` rollouts, on ``units``
        spread over ``nodes`` nodes (the gradient all-reduce of ``data_parallel`` added when given)."""
        work = (
            self.update_s_per_token * tokens
            + self.update_s_per_sequence * sequences
            + self.update_s_per_prompt_token * prompt_tokens
        )
        compute = self.update_fixed_s + work * (self.units / units) ** self.unit_exponent
        if self.data_parallel is None:
            return compute
        return compute + self.data_parallel.allreduce_s(units, nodes)

    def sync_split_s(self, tokens: float) -> float:
        """Weight sync when trainer and engines hold different GPUs (a broadcast over the network)."""
        if self.data_parallel is None or self.data_parallel.split_sync_s is None:
            return self.sync_s(tokens)
        return self.data_parallel.split_sync_s

    def sync_s(self, tokens: float) -> float:
        return self.sync_fixed_s + self.sync_s_per_token * tokens


class ContentionEntry(_Strict):
    """Fractional slowdowns while both run on shared units: 0.25 means 25 % longer."""

    gen_slowdown: float = Field(ge=0)
    score_slowdown: float = Field(ge=0)


class ContentionModel(_Strict):
    """Default slowdowns plus per-runtime ones from the contention experiment (issue 5)."""

    default: ContentionEntry
    per_runtime: dict[str, ContentionEntry] = Field(default_factory=dict)

    def for_runtime(self, runtime: str) -> ContentionEntry:
        return self.per_runtime.get(runtime, self.default)


def nearest_threads(by_threads: Mapping[int, float], units: float) -> float:
    """The value measured at the thread count nearest ``units`` (the larger of two as near)."""
    return by_threads[min(by_threads, key=lambda t: (abs(t - units), -t))]


class RolesModel(_Strict):
    """Costs of PPO's experience roles, timed directly on the policy-sized models (``rlsim profile``).

    Each is a ``ScorerLatencyModel`` (the same ``a + (b x sequences + c x padded tokens) x (units /
    u) ** alpha`` form, fit statistics and samples) for one micro-batch of rollouts, prompt and
    response, padded to its longest: ``reference`` per runtime (its log-probs of the response
    tokens), ``values`` (the critic's forward) and ``update_critic`` (the critic's forward and
    backward; ``intercept_s`` holds the optimizer step). ``reference["eager"]`` is the policy's own
    forward too (the same model and computation), which is how the trainer's measured update is
    split into the advantages pass (the policy's log-probs) and the actor update. ``update_actor`` (the
    policy trainer's update of one micro-batch and one optimizer step) and ``optimizer_step_s`` price
    what ``trainer.mini_batch_size`` and ``trainer.epochs`` add (``sim/update_steps.py``).
    """

    micro_batch: int = Field(ge=1, description="sequences per micro-batch the calls were timed with")
    reference: dict[str, ScorerLatencyModel] = Field(description="by reference runtime: eager (required), ort")
    values: ScorerLatencyModel
    update_critic: ScorerLatencyModel
    update_actor: UpdateCostModel | None = Field(
        default=None,
        description="the trainer's forward and backward of one micro-batch, its optimizer step apart (None: none)",
    )
    optimizer_step_s: dict[str, dict[int, float]] = Field(
        default_factory=dict,
        description="median seconds of one gradient clip + AdamW step, by role (actor, critic) and thread count",
    )
    sharing_efficiency: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description=(
            "share of the cores' work still done while processes pinned to the same cores want more threads than "
            "they hold (two critic updates at once vs one after the other); 1: nothing lost"
        ),
    )
    sharing_efficiency_measured: bool = False
    sharing_efficiency_by_threads: dict[int, float] = Field(
        default_factory=dict,
        description=(
            "sharing_efficiency measured per thread count of the two processes (each pinned to that many cores "
            "with that many threads); sharing_efficiency is the one at the most threads"
        ),
    )

    def optimizer_s(self, role: str, units: float) -> float | None:
        """One optimizer step of ``role`` (``actor``, ``critic``) at the measured thread count nearest
        ``units`` (the larger of two as near); None when the profile did not time it."""
        by_threads = self.optimizer_step_s.get(role)
        return nearest_threads(by_threads, units) if by_threads else None

    def efficiency(self, threads: float) -> float:
        """Sharing efficiency of processes with ``threads`` threads each: the one measured at the most
        threads not above ``threads`` (the fewest measured, below them all), else ``sharing_efficiency``."""
        if not self.sharing_efficiency_by_threads:
            return self.sharing_efficiency
        counts = sorted(self.sharing_efficiency_by_threads)
        below = [c for c in counts if c <= threads + 1e-9]
        return self.sharing_efficiency_by_threads[below[-1] if below else counts[0]]

    @model_validator(mode="after")
    def _eager_present(self) -> RolesModel:
        if "eager" not in self.reference:
            raise ValueError("roles.reference needs eager: the policy's own forward (the advantages pass)")
        bad = {k: v for k, v in self.sharing_efficiency_by_threads.items() if k < 1 or not 0 < v <= 1}
        if bad:
            raise ValueError(f"roles.sharing_efficiency_by_threads needs threads >= 1 and values in (0, 1]: {bad}")
        return self


class ProfileAnchor(_Strict):
    """The anchor's step as ``rlsim profile`` measured it (config ``anchor`` of the profile config), so that
    ``rlsim plan validate`` can also scale its predictions to the profile's own hour (docs/planner.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    config: str = Field(min_length=1, description="the anchor: a configuration of the calibration loop set")
    loop_set: str = Field(description="the calibration loop set, as the profile config named it")
    measured_step_s: float = Field(gt=0, description="median step over the measured steps")
    phases_s: dict[str, float] = Field(default_factory=dict, description="median seconds per phase")
    steps: list[int] = Field(default_factory=list, description="the loop's step numbers measured")
    measured_at: str = Field(description="when the run finished (ISO 8601, UTC)")
    warmup_steps: int = Field(default=1, ge=0, description="warm-up steps of the run, not measured")
    run_config: dict[str, Any] = Field(
        description="the anchor's `rlsim run` config (JSON): the same run? and what a set without an anchor runs"
    )


class CalibrationSet(_Strict):
    """The loop configurations ``rlsim profile`` calibrated on, by name: what an anchor must be one of."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    loop_set: str = Field(description="the calibration loop set, as the profile config named it")
    configs: dict[str, dict[str, Any]] = Field(description="each configuration's `rlsim run` config (JSON)")
    fit_errors: dict[str, float] = Field(
        default_factory=dict,
        description="each configuration's run re-predicted by this profile, predicted / measured step - 1 (its "
        "own fit's miss; empty in profiles written before rlsim profile checked it)",
    )


class Profile(_Strict):
    """Everything the planner needs about one hardware kind. See the module docstring."""

    rlsim_version: str
    schema_version: int
    hardware_kind: str
    illustrative: bool = Field(description="true: example numbers, not measured on real hardware")
    notes: list[str] = Field(default_factory=list)
    unmeasured: list[str] = Field(default_factory=list, description="what was filled in, not measured")
    machine: dict[str, Any] | None = Field(
        default=None,
        description=(
            "rlsim.fingerprint.machine_fingerprint() of the machine measured on (a sourced profile: the hardware its "
            "sources ran on); None in profiles written before fingerprints"
        ),
    )
    sources: dict[str, Source] = Field(
        default_factory=dict,
        description=("public sources of a sourced profile's numbers, by key; every number's `source` names one"),
    )
    provenance: dict[str, NumberSource] = Field(
        default_factory=dict,
        description=(
            "a sourced profile: for each number, by its dotted path (`generation.base_s`), where it comes from"
        ),
    )
    runtimes: dict[str, ScorerLatencyModel]
    reward_functions: dict[str, RewardFunctionModel] = Field(default_factory=dict)
    generation: GenerationModel | None = None
    trainer: TrainerModel | None = None
    contention: ContentionModel | None = None
    roles: RolesModel | None = Field(
        default=None, description="PPO's reference and critic costs (None: profiles without them plan GRPO only)"
    )
    anchor: ProfileAnchor | None = Field(default=None, description="the anchor's step at the profile's hour")
    calibration: CalibrationSet | None = Field(
        default=None, description="the loop configurations calibrated on (None: profiles before rlsim kept them)"
    )

    def runtime(self, name: str, source: str = "profile") -> ScorerLatencyModel:
        """The model for key ``name`` (``runtime`` or ``runtime@device``); else an RlsimError listing keys."""
        if name not in self.runtimes:
            # "ort" finds "ort@cpu" when the profile has that runtime on one device only.
            matches = [key for key in self.runtimes if key.split("@")[0] == name]
            if len(matches) == 1:
                return self.runtimes[matches[0]]
            have = ", ".join(sorted(self.runtimes)) or "none"
            raise RlsimError(
                f"{source} ({self.hardware_kind}) has no latency model for runtime {name!r} (it has: {have}); "
                f"measure it with `rlsim profile CONFIG --out PROFILE` listing {name!r} in runtimes, "
                "or drop it from the plan"
            )
        return self.runtimes[name]

    def reward(self, name: str, source: str = "profile") -> ScorerLatencyModel | RewardFunctionModel:
        """A reward function of ``reward_functions`` by that name, else the scorer runtime ``name``."""
        if name in self.reward_functions:
            return self.reward_functions[name]
        return self.runtime(name, source)

    def require_sections(self, source: str = "profile") -> None:
        """Raise unless generation, trainer and contention are present (the simulation needs all three)."""
        missing = [name for name in ("generation", "trainer", "contention") if getattr(self, name) is None]
        if missing:
            raise RlsimError(
                f"{source} has no {', '.join(missing)} model, which the planner needs; measure them with "
                "`rlsim profile CONFIG --loop-results results.json`, or fill them from another profile "
                "with `rlsim profile ... --fill-from PROFILE`"
            )

    def require_roles(self, reference_runtime: str | None, critic: bool, source: str = "profile") -> RolesModel:
        """The ``roles`` section for a step with a reference on ``reference_runtime`` (None: no KL) and/or
        a critic; an RlsimError naming the re-profile command when it (or that runtime) is missing."""
        fix = (
            f"re-measure the {source} with this rlsim: `rlsim profile configs/profiles/measure_cpu_2core.yaml "
            "--out PROFILE` (its `roles:` section times the reference and the critic)"
        )
        if self.roles is None:
            needs = " and ".join(n for n, on in (("reference", reference_runtime), ("critic", critic)) if on)
            raise RlsimError(
                f"{source} ({self.hardware_kind}) has no roles section: it cannot simulate the {needs} "
                f"of a PPO or KL step; {fix}"
            )
        if reference_runtime is not None and reference_runtime not in self.roles.reference:
            have = ", ".join(sorted(self.roles.reference))
            raise RlsimError(
                f"{source} ({self.hardware_kind}) has no reference cost for runtime {reference_runtime!r} "
                f"(it has: {have}); {fix} with {reference_runtime!r} in roles.reference_runtimes"
            )
        return self.roles


def new_profile_header(hardware_kind: str, illustrative: bool) -> dict[str, object]:
    """The version fields every profile starts with, for this rlsim."""
    return {
        "rlsim_version": rlsim.__version__,
        "schema_version": SCHEMA_VERSION,
        "hardware_kind": hardware_kind,
        "illustrative": illustrative,
    }


def load_profile(path: str | Path) -> Profile:
    """Read and check a profile file; every problem is one RlsimError that says how to fix it."""
    p = Path(path)
    if not p.is_file():
        raise RlsimError(f"profile {p} does not exist; measure one with `rlsim profile CONFIG --out {p}`")
    try:
        data = json.loads(read_user_text(p, "profile"))
    except json.JSONDecodeError as err:
        raise RlsimError(f"profile {p} is not valid JSON ({err}); re-measure it with `rlsim profile`") from None
    if not isinstance(data, dict):
        raise RlsimError(f"profile {p} must hold a JSON object; re-measure it with `rlsim profile`")
    _check_versions(data, p)
    try:
        return Profile.model_validate(data)
    except ValidationError as err:
        errors = [f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in err.errors()]
        raise ConfigError(errors, source=f"profile {p}") from None


def _check_versions(data: dict[str, object], path: Path) -> None:
    schema = data.get("schema_version")
    if schema != SCHEMA_VERSION:
        raise RlsimError(
            f"profile {path} has schema version {schema!r} but this rlsim reads version {SCHEMA_VERSION}; "
            f"re-measure it with this rlsim (`rlsim profile CONFIG --out {path}`)"
        )
    version = data.get("rlsim_version")
    if version != rlsim.__version__:
        logging.getLogger(__name__).warning(
            "note: profile %s was written by rlsim %s, this is rlsim %s (same schema %d: read as it is)",
            path,
            version,
            rlsim.__version__,
            SCHEMA_VERSION,
        )


def save_profile(profile: Profile, path: str | Path) -> Path:
    """Write ``profile`` as JSON atomically (a reader never sees half a profile)."""
    return atomic_write_json(path, profile.model_dump(mode="json"))
