"""The scoring role: texts in, one float32 reward per text out.

A ``Scorer`` runs *one forward pass per call* of ``score_batch``: how texts are grouped into
batches is the batcher's job (``rlsim.batching``), so runtimes and batching strategies can be
combined freely and measured apart. Tokenisation (reward tokenizer, truncation, padding) is part
of scoring time, as it is in a real RLHF pipeline where policy and reward model differ.

Three protocols say what callers may use: ``Scorer`` (every runtime), ``TokenScorer`` (also takes
reward-model token ids) and ``ServerScorer`` (scores through a server process it supervises).
Runtimes register with ``@register_scorer(name, RuntimeInfo(...))``; the entry's metadata
(needed modules, precision, quantized, server-backed) is the only list of runtimes there is.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np

from rlsim.errors import RlsimError
from rlsim.hardware.cpu import cpu_flags
from rlsim.registry import Registry, missing_modules
from rlsim.scoring.http_protocols import check_protocol as check_http_protocol
from rlsim.scoring.int8_options import Int8Options, check_int8_options

if TYPE_CHECKING:
    from rlsim.models.reward import RewardModelSpec


@dataclass(frozen=True)
class ScorerSettings:
    """Runtime knobs shared by every backend; a backend ignores what does not apply to it.

    ``threads``: torch threads / ORT intra-op threads (None: the cores this process may run on).
    ``spinning``: let ORT worker threads spin between ops (lower latency, burns idle cores).
    ``max_length``: truncation limit in tokens (None: the model's own limit).
    ``truncation``: ``left`` keeps the end of a text (the response, which the reward is about).
    ``compile_buckets``: sequence lengths ``compile`` pads to, so it compiles once per bucket.
    ``server_runtime`` / ``url``: for ``http``: the runtime the server wraps, or an existing server.
    ``options``: the settings of a reward that is no model (``function``, ``sandbox``) or of how ``http`` calls
    its server (limits, retries, ``on_timeout``): rlsim.rewards.options.
    ``http_deadline_s``: for ``http``: the longest one batch may take, the client's retries included (seconds).
    ``http_protocol``: for ``http``: ``rlsim`` (``/score``), ``openrlhf`` (``/get_reward``) or ``vllm-classify``
    (``/classify``), see ``rlsim.scoring.http_protocols``; checked when the settings are made.
    ``engine_inline``: for ``vllm``: the engine core and worker run in this process, not two spawned ones.
    ``int8_calibration`` / ``int8_smooth_alpha``: how the calibrated int8 graphs are built (``*-int8-static``: the
    activation range method, ``minmax`` / ``percentile`` / ``entropy``; ``*-int8-static`` and ``*-int8-mixed``:
    SmoothQuant's alpha in (0, 1], None for no smoothing), see ``rlsim.scoring.int8_options``; checked when the
    settings are made.
    """

    device: Literal["cpu", "cuda"] = "cpu"
    threads: int | None = None
    inter_op_threads: int = 1
    spinning: bool = True
    engine_inline: bool = False
    max_length: int | None = None
    truncation: Literal["left", "right"] = "left"
    compile_buckets: tuple[int, ...] = (16, 32, 64, 128, 256, 512)
    server_runtime: str = "ort"
    url: str | None = None
    ort_path: str | None = None
    http_deadline_s: float = 60.0
    http_protocol: Literal["rlsim", "openrlhf", "vllm-classify"] = "rlsim"
    int8_calibration: Literal["minmax", "percentile", "entropy"] = "minmax"
    int8_smooth_alpha: float | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_http_protocol(self.http_protocol)
        check_int8_options(self.int8_calibration, self.int8_smooth_alpha)

    def int8_options(self) -> Int8Options:
        return Int8Options(self.int8_calibration, self.int8_smooth_alpha)

    def resolved_threads(self) -> int:
        return self.threads if self.threads else len(os.sched_getaffinity(0))


@dataclass
class ScorerStats:
    """What a scorer did, kept apart from steady-state timing: load/compile are one-off costs."""

    load_s: float = 0.0
    compile_s: float = 0.0
    batches: int = 0
    sequences: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    truncated: int = 0

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


@runtime_checkable
class Scorer(Protocol):
    """What every runtime offers. ``max_length``: the truncation limit in reward-model tokens."""

    name: str
    stats: ScorerStats
    max_length: int

    def score_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Score ``texts`` in one forward pass; returns float32 array of shape ``(len(texts),)``."""
        ...

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Untruncated length of each text in reward-model tokens (special tokens included)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class TokenScorer(Scorer, Protocol):
    """A scorer that also takes reward-model token ids (the server's ``{"token_ids": ...}`` path)."""

    vocab_size: int

    def score_token_ids(self, rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, list[bool]]:
        """Score id rows in one forward pass: float32 rewards ``(len(rows),)`` and which rows were cut."""
        ...


@runtime_checkable
class ServerScorer(Scorer, Protocol):
    """A scorer that calls a server process; when it started that server, it can say if it died."""

    server_pid: int | None

    def server_exited(self) -> bool:
        """True once the server this scorer started has exited (never for a server it did not start)."""
        ...


@runtime_checkable
class PairScorer(Scorer, Protocol):
    """A reward that reads the prompt and the response apart (a verifier, a sandbox): the loop calls this
    instead of ``score_batch`` (which scores each text as a response to an empty prompt)."""

    def score_pairs(self, prompts: Sequence[str], responses: Sequence[str]) -> np.ndarray:
        """float32 rewards ``(len(prompts),)``; one call may run its items in parallel."""
        ...


@runtime_checkable
class CountingScorer(Scorer, Protocol):
    """A reward some of whose calls end otherwise than scored (timed out, failed, stood in for): it counts them."""

    def take_outcomes(self) -> dict[str, int]:
        """Counts since the last call (e.g. ``{"timeouts": 2}``), then starts again from zero."""
        ...


@dataclass(frozen=True)
class RuntimeInfo:
    """What a runtime needs and computes in.

    ``needs``: (import name, how to install it) pairs, checked without importing anything.
    ``precision``: number format it computes in (``fp32``, ``int8``, ``bf16``, ``fp16``); None: the
    wrapped runtime's (``http``).
    ``quantized``: int8 weights (``calibrated``: activation ranges fixed from the calibration split).
    ``server``: scores through a server process (a ``ServerScorer``).
    ``devices``: where it can run at all (``fp16`` is CUDA only).
    ``cpu_flags``: on CPU, any one of these /proc/cpuinfo flags is needed (bf16 dot products or AMX);
    without them torch emulates the format slower than fp32, so the runtime is refused.
    ``variant``: a precision variant of another runtime (``eager-bf16``, ``ort-int8-static``): named by
    ``variants`` rather than ``all``, so the default sets stay what they were.
    ``kind``: ``model`` (a reward model: verify and the fidelity rules compare it with fp32 eager), or a reward
    that is no model (``function``: a Python verifier, ``sandbox``: code execution, ``judge``: a generative judge
    LLM, rlsim.rewards), named only
    explicitly and never compared with a model.
    ``explicit``: a model runtime named only explicitly, never by ``all`` (``vllm``: an engine that takes a
    minute to start on a small CPU would add that to every ``all`` run).
    ``pads``: a batch is padded to its longest text; False: the runtime schedules the rows itself with no
    padding (``vllm``), so its cost is in real tokens (the planner's ``ScorerLatencyModel.pads``).
    ``int8_settings``: the ``ScorerSettings`` fields that say how it builds its int8 graph (``int8_calibration``,
    ``int8_smooth_alpha``); a config that sets one for a runtime that does not read it is refused.
    """

    needs: tuple[tuple[str, str], ...] = ()
    precision: str | None = "fp32"
    quantized: bool = False
    server: bool = False
    calibrated: bool = False
    devices: tuple[str, ...] = ("cpu", "cuda")
    cpu_flags: tuple[str, ...] = ()
    variant: bool = False
    kind: Literal["model", "function", "sandbox", "judge"] = "model"
    explicit: bool = False
    pads: bool = True
    int8_settings: tuple[str, ...] = ()

    @property
    def reduced_precision(self) -> bool:
        """Expected to deviate from fp32 (verify and the fidelity rules compare ranks, not values)."""
        return self.precision not in ("fp32", None)

    def missing(self) -> list[tuple[str, str]]:
        """The needed modules that are not installed, as (module, how to install) pairs."""
        absent = set(missing_modules(m for m, _ in self.needs))
        return [(m, fix) for m, fix in self.needs if m in absent]

    def hardware_reason(self, runtime: str, device: str, flags: frozenset[str] | None = None) -> str | None:
        """Why this machine cannot run ``runtime`` on ``device`` (a missing CPU flag, no GPU), or None."""
        if device not in self.devices:
            return f"runtime {runtime!r} ({self.precision}) runs on {'/'.join(self.devices)} only, not {device}"
        if device == "cpu" and self.cpu_flags:
            have = cpu_flags() if flags is None else flags
            if not any(f in have for f in self.cpu_flags):
                return (
                    f"runtime {runtime!r} needs a CPU with {self.precision} instructions (flag "
                    f"{' or '.join(self.cpu_flags)} in /proc/cpuinfo), which this CPU lacks; torch would emulate "
                    f"{self.precision} slower than fp32. Use the fp32 or int8 runtimes here, or --device cuda"
                )
        return None


class UnsupportedRuntime(RlsimError):
    """This machine cannot run the runtime (missing CPU instructions, or no GPU): skipped, not failed."""


# Registration order is the order ``all`` lists runtimes in: the reference first, http last, then the precision
# variants (bf16/fp16 and calibrated int8), which ``all`` lists only where they can run.
BUILTIN_RUNTIME_MODULES = tuple(
    f"rlsim.scoring.{m}"
    for m in ("torch_scorers", "ort_scorer", "native_scorer", "http_scorer", "half_precision_scorers",
              "int8_static_scorers", "int8_mixed_scorers", "vllm_scorer")
) + ("rlsim.rewards.function_reward", "rlsim.rewards.sandbox_reward", "rlsim.rewards.genrm_reward")  # fmt: skip
SCORERS: Registry[type, RuntimeInfo] = Registry("scoring runtime", RuntimeInfo, builtins=BUILTIN_RUNTIME_MODULES)
register_scorer = SCORERS.register


def runtime_names(builtin_only: bool = True, variants: bool = False, device: str | None = None) -> list[str]:
    """Registered reward-model runtimes in registration order; by default only rlsim's own core ones (what ``all``
    means; rewards that are no model, ``function`` and ``sandbox``, and runtimes named only explicitly, ``vllm``,
    are never in it).

    ``variants``: the precision variants instead. ``device``: only those this machine's hardware can run there.
    """
    return [
        e.name
        for e in SCORERS.entries()
        if (e.builtin or not builtin_only)
        and e.info.kind == "model"
        and e.info.variant == variants
        and not e.info.explicit
        and (device is None or e.info.hardware_reason(e.name, device) is None)
    ]


def int8_setting_problems(settings: ScorerSettings, runtimes: Sequence[str], where: str = "") -> list[str]:
    """A line for each int8 build setting changed from its default that none of ``runtimes`` reads, naming the
    runtimes that do; ``where``: the prefix of the setting's name in the message (``reward.``)."""
    defaults = ScorerSettings()
    problems = []
    for key in ("int8_calibration", "int8_smooth_alpha"):
        if getattr(settings, key) == getattr(defaults, key):
            continue
        if not any(key in SCORERS.info(r).int8_settings for r in runtimes):
            readers = [e.name for e in SCORERS.entries() if key in e.info.int8_settings]
            problems.append(f"{where}{key}: applies to {', '.join(readers)} only, not to {', '.join(runtimes)}; "
                            "drop the setting or pick one of those runtimes")  # fmt: skip
    return problems


def unavailable_reason(runtime: str, device: str | None = "cpu") -> str | None:
    """Why ``runtime`` cannot run here (missing packages and the fix, or missing hardware on ``device``; None:
    packages only), or None when it can."""
    info = SCORERS.info(runtime)
    missing = info.missing()
    if missing:
        fixes = "; ".join(dict.fromkeys(fix for _, fix in missing))
        return f"runtime {runtime!r} needs {', '.join(m for m, _ in missing)}, which is not installed: {fixes}"
    return None if device is None else info.hardware_reason(runtime, device)


def make_scorer(runtime: str, model: RewardModelSpec, settings: ScorerSettings | None = None) -> Scorer:
    """Build a scorer by registry name, e.g. ``make_scorer("ort", resolve_reward_model("minilm-rm"))``.

    Raises ``UnsupportedRuntime`` when the hardware lacks what the runtime needs, ``RlsimError`` when a package does.
    """
    settings = settings or ScorerSettings()
    cls = SCORERS.get(runtime)
    hardware = SCORERS.info(runtime).hardware_reason(runtime, settings.device)
    if hardware:
        raise UnsupportedRuntime(hardware)
    reason = unavailable_reason(runtime, settings.device)
    if reason:
        raise RlsimError(reason)
    t0 = time.perf_counter()
    scorer = cls(model, settings)
    scorer.stats.load_s = time.perf_counter() - t0
    check_protocol(runtime, scorer)
    return scorer


def check_protocol(runtime: str, scorer: object) -> None:
    """Raise naming what a (plug-in) scorer lacks, rather than failing later inside a batcher or server."""
    lacking = [m for m in ("name", "stats", "max_length", "score_batch", "token_lengths", "close")
               if not hasattr(scorer, m)]  # fmt: skip
    if SCORERS.info(runtime).server and not isinstance(scorer, ServerScorer):
        lacking += ["server_pid", "server_exited"]
    if lacking:
        raise RlsimError(
            f"runtime {runtime!r} ({type(scorer).__qualname__}) lacks {', '.join(lacking)}; "
            "implement the rlsim.scoring.base.Scorer protocol (see tests/helpers/bench_fake_runtime.py)"
        )


def expand_runtimes(spec: str | Sequence[str], device: str | None = None) -> list[str]:
    """Comma-separated names -> list; ``all`` -> every built-in core runtime, ``variants`` -> the precision
    variants (with ``device``: only those this hardware can run); unknown names raise.

    ``"eager,ort"`` -> ``["eager", "ort"]``; ``"all,variants"`` -> everything rlsim registers.
    """
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    names: list[str] = []
    for item in (i.strip() for i in items if i.strip()):
        if item in ("all", "variants"):
            names += runtime_names(variants=item == "variants", device=device)
        else:
            SCORERS.get(item)
            names.append(item)
    return list(dict.fromkeys(names))
