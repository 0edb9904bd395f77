"""The generation role: requests in, rollouts out, either all at once or streamed as they finish.

Backends register by name (``vllm`` default, ``hf`` fallback) and import their heavy dependencies
inside their constructors. ``stream`` is what the ``overlapped`` schedule uses: rollouts come back in
micro-batches as soon as they finish, while the rest keep generating.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from rlsim.registry import Registry
from rlsim.rollout.types import Rollout, RolloutRequest


@dataclass(frozen=True)
class GeneratorSettings:
    """Engine and sampling knobs; a backend ignores what does not apply to it.

    ``cores``: CPU ids the engine's compute threads are bound to (empty: leave binding to the
    process affinity). ``threads``: compute threads (None: one per core). ``behaviour_logprobs``: each
    rollout carries the sampled tokens' log-probs (the async schedule's off-policy correction needs them).
    ``kv_cache_gib``: vLLM's CPU KV cache in GiB. ``gpu_memory_fraction``: vLLM's share of GPU memory on
    ``device: cuda``. ``engine_inline``: vLLM's engine core and worker run in the caller's process instead of
    two spawned ones (``policy.engine_process: inline``).
    """

    device: Literal["cpu", "cuda"] = "cpu"
    dtype: str = "float32"
    max_model_len: int = 512
    enforce_eager: bool = True
    kv_cache_gib: float = 1.0
    gpu_memory_fraction: float = 0.5
    seed: int = 0
    temperature: float = 1.0
    top_p: float = 1.0
    cores: tuple[int, ...] = ()
    threads: int | None = None
    behaviour_logprobs: bool = False
    engine_inline: bool = False
    extra_engine_args: dict[str, object] = field(default_factory=dict)

    def bound_cores(self) -> list[int]:
        """The cores compute threads run on: the first ``threads`` of ``cores``."""
        cores = list(self.cores)
        return cores[: self.threads] if self.threads else cores


@dataclass
class SyncResult:
    """How new weights reached the engine: ``method`` is ``vllm-reload``, ``hf-load`` or ``simulated``."""

    method: str
    seconds: float
    detail: str = ""


@runtime_checkable
class Generator(Protocol):
    name: str

    def generate(self, requests: Sequence[RolloutRequest]) -> list[Rollout]:
        """Generate every request; rollouts in request order."""
        ...

    def stream(self, requests: Sequence[RolloutRequest], micro_batch: int) -> Iterator[list[Rollout]]:
        """Yield finished rollouts in groups of ``micro_batch`` (the last may be smaller), in finish order."""
        ...

    def load_weights(self, weights_dir: Path) -> SyncResult:
        """Load the policy weights saved in ``weights_dir`` (safetensors) into the engine."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class GeneratorInfo:
    """What a generation backend can do. ``behaviour_logprobs``: it can return each sampled token's log-prob
    under the weights that sampled it (``GeneratorSettings.behaviour_logprobs``). ``weight_swap``: its
    ``generate`` takes a ``SwapPoint`` and loads new weights between engine steps, the requests in flight
    continuing under them (``async.partial_rollouts``)."""

    behaviour_logprobs: bool = False
    weight_swap: bool = False


class SwapPoint(Protocol):
    """Where a generate call that is under way learns of new weights (``RolloutWorker`` implements it).

    The generator asks ``pending()`` before each engine step; on ``(folder, version)`` it loads those
    weights, the requests in flight continuing under them, and reports the load with ``swapped``."""

    def pending(self) -> tuple[Path, int] | None: ...

    def swapped(self, result: SyncResult, start: float, end: float) -> None: ...


GENERATORS: Registry[type, GeneratorInfo] = Registry(
    "generation backend", GeneratorInfo, builtins=["rlsim.rollout.hf_generator", "rlsim.rollout.vllm_generator"]
)
register_generator = GENERATORS.register


def make_generator(backend: str, policy_dir: Path, settings: GeneratorSettings) -> Generator:
    """Build a generator by registry name, e.g. ``make_generator("vllm", resolve_policy("tiny-llama"), s)``."""
    return GENERATORS.get(backend)(policy_dir, settings)


def chunked(rollouts: list[Rollout], size: int) -> Iterator[list[Rollout]]:
    """Split ``rollouts`` into lists of ``size`` (the last may be shorter)."""
    for i in range(0, len(rollouts), size):
        yield rollouts[i : i + size]
