"""The offline batching role: given every request's token length, decide which requests share a batch.

A ``Batcher`` returns a *plan*: a list of batches, each a list of indices into the input. Scores are
written back by index (``rlsim.batching.scoring.score_texts``), so any grouping returns each score
to the request it belongs to. Strategies register by name with ``@register_batcher``; build them
with ``make_batcher(name, size=..., budget=...)``.

The online ``DynamicBatcher`` (``rlsim.batching.dynamic``) serves requests that arrive over time
and has a different shape (submit -> future). It is registered too, as ``dynamic`` with
``BatcherInfo(online=True)``, so the registry lists every batcher rlsim has; the offline helpers
(``batcher_names``, ``make_batcher``, the loop's ``reward.batcher``) leave it out or refuse it by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from rlsim.errors import RlsimError
from rlsim.registry import Registry

Plan = list[list[int]]


@runtime_checkable
class Batcher(Protocol):
    """Plans batches from token lengths (after truncation), one entry per request."""

    name: str

    def plan(self, lengths: Sequence[int]) -> Plan:
        """Group request indices ``0..len(lengths)-1`` into batches; every index exactly once."""
        ...

    def describe(self) -> str:
        """Short label such as ``sorted/32`` or ``token-budget/4096``."""
        ...


@dataclass(frozen=True)
class BatcherInfo:
    """``sizing``: what bounds a batch: ``size`` (sequences, from ``batch_size``) or ``budget``
    (padded tokens, from ``token_budget``). ``online``: the batcher takes requests as they arrive
    (``DynamicBatcher``, used by ``rlsim serve``) instead of planning a known set."""

    sizing: Literal["size", "budget"] = "size"
    online: bool = False  # True: requests arrive over time (submit -> future); not a planner of known lengths


class BatcherFactory(Protocol):
    """What ``@register_batcher`` registers: a class whose ``from_settings`` builds the batcher."""

    def from_settings(self, size: int | None = None, budget: int | None = None) -> Batcher: ...


BATCHERS: Registry[BatcherFactory, BatcherInfo] = Registry(
    "batcher", BatcherInfo, builtins=[f"rlsim.batching.{m}" for m in ("fixed_size", "token_budget", "dynamic")]
)
register_batcher = BATCHERS.register


def batcher_names(sizing: str | None = None, online: bool = False) -> list[str]:
    """Registered batchers in registration order, offline ones unless ``online``, optionally only those sized by
    ``sizing``."""
    entries = BATCHERS.entries()
    return [e.name for e in entries if e.info.online == online and (sizing is None or e.info.sizing == sizing)]


@dataclass(frozen=True)
class PlanStats:
    """Token accounting of a plan. ``padded_tokens`` = sum over batches of longest x count."""

    batches: int
    sequences: int
    real_tokens: int
    padded_tokens: int

    @property
    def padding_waste(self) -> float:
        """Share of the computed (padded) tokens that are padding: 0.0 = none, 0.5 = half."""
        if self.padded_tokens == 0:
            return 0.0
        return (self.padded_tokens - self.real_tokens) / self.padded_tokens


def plan_stats(plan: Plan, lengths: Sequence[int]) -> PlanStats:
    """Count real and padded tokens of ``plan`` over ``lengths`` (tokens per request)."""
    padded = sum(max(lengths[i] for i in batch) * len(batch) for batch in plan if batch)
    return PlanStats(
        batches=sum(1 for b in plan if b),
        sequences=sum(len(b) for b in plan),
        real_tokens=int(sum(lengths)),
        padded_tokens=int(padded),
    )


def padding_waste(plan: Plan, lengths: Sequence[int]) -> float:
    """Padding tokens / all computed tokens of ``plan`` (see ``PlanStats.padding_waste``)."""
    return plan_stats(plan, lengths).padding_waste


def check_plan(plan: Plan, n: int) -> None:
    """Raise unless ``plan`` uses every index in ``0..n-1`` exactly once (no lost or doubled request)."""
    seen = sorted(i for batch in plan for i in batch)
    if seen != list(range(n)):
        missing = sorted(set(range(n)) - set(seen))[:5]
        raise RuntimeError(
            f"batch plan does not cover {n} requests exactly once (missing {missing}, "
            f"{len(seen)} entries); this is a bug in the batcher"
        )


def length_order(lengths: Sequence[int]) -> list[int]:
    """Indices sorted by length, shortest first; ties keep arrival order (stable, deterministic)."""
    return sorted(range(len(lengths)), key=lambda i: (lengths[i], i))


def make_batcher(name: str, size: int | None = None, budget: int | None = None) -> Batcher:
    """Build a registered batcher: ``size``-sized ones (fixed, sorted) take ``size``, ``budget`` ones take ``budget``.

    Raises ``RlsimError`` naming the valid names or the missing/invalid setting.
    """
    cls = BATCHERS.get(name)
    return cls.from_settings(size=size, budget=budget)


def positive(value: int | None, what: str, fix: str) -> int:
    """Return ``value`` if it is an int >= 1, else raise an ``RlsimError`` naming ``fix``."""
    if value is None or isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RlsimError(f"{what} must be a whole number >= 1 (got {value!r}); {fix}")
    return value
