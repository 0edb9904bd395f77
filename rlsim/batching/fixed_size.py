"""Fixed-size batchers: ``fixed`` (arrival order) and ``sorted`` (length order, less padding)."""

from __future__ import annotations

from collections.abc import Sequence

from rlsim.batching.base import BatcherInfo, Plan, length_order, positive, register_batcher


def _chunks(order: list[int], size: int) -> Plan:
    return [order[i : i + size] for i in range(0, len(order), size)]


@register_batcher("fixed", BatcherInfo(sizing="size"))
class FixedBatcher:
    """Batches of ``size`` requests in arrival order: the default of most RLHF set-ups.

    Each batch is padded to its longest member, so a mix of short and long texts wastes compute.
    """

    name = "fixed"

    def __init__(self, size: int) -> None:
        self.size = positive(size, "batch size", "pass --batch-sizes 8,32 or similar")

    @classmethod
    def from_settings(cls, size: int | None = None, budget: int | None = None) -> FixedBatcher:
        return cls(positive(size, f"{cls.name} batcher's batch size", "give it a batch size such as 32"))

    def plan(self, lengths: Sequence[int]) -> Plan:
        return _chunks(list(range(len(lengths))), self.size)

    def describe(self) -> str:
        return f"{self.name}/{self.size}"


@register_batcher("sorted", BatcherInfo(sizing="size"))
class SortedBatcher(FixedBatcher):
    """Sort by token length, then cut batches of ``size``: neighbours have similar lengths.

    Scores still go back to the caller's order (``score_texts`` writes them by index).
    """

    name = "sorted"

    def plan(self, lengths: Sequence[int]) -> Plan:
        return _chunks(length_order(lengths), self.size)
