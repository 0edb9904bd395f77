"""``token-budget``: batches bounded by padded tokens rather than by count (text-embeddings-inference style).

Requests are taken in length order (shortest first) and added to the current batch while
``longest x count`` stays within ``budget`` tokens; the next request that would pass it starts a new
batch. Short texts therefore travel in big batches and long ones in small batches, keeping the
work per forward pass (and its memory) roughly constant.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlsim.batching.base import BatcherInfo, Plan, length_order, positive, register_batcher
from rlsim.errors import RlsimError


@register_batcher("token-budget", BatcherInfo(sizing="budget"))
class TokenBudgetBatcher:
    """``budget``: the most padded tokens (longest x count) one batch may hold."""

    name = "token-budget"

    def __init__(self, budget: int) -> None:
        self.budget = positive(budget, "token budget", "pass --budgets 4096 or similar (tokens per batch)")

    @classmethod
    def from_settings(cls, size: int | None = None, budget: int | None = None) -> TokenBudgetBatcher:
        return cls(positive(budget, "token-budget batcher's budget", "give it a budget in tokens such as 4096"))

    def plan(self, lengths: Sequence[int]) -> Plan:
        check_budget(self.budget, lengths)
        plan: Plan = []
        batch: list[int] = []
        for i in length_order(lengths):
            # Length order means request i is the longest of its batch once added.
            if batch and (len(batch) + 1) * lengths[i] > self.budget:
                plan.append(batch)
                batch = []
            batch.append(i)
        if batch:
            plan.append(batch)
        return plan

    def describe(self) -> str:
        return f"{self.name}/{self.budget}"


def check_budget(budget: int, lengths: Sequence[int]) -> None:
    """Raise ``RlsimError`` if a single request is longer than ``budget`` tokens."""
    longest = max(lengths, default=0)
    if longest > budget:
        raise RlsimError(
            f"token budget {budget} is smaller than one sequence ({longest} tokens after truncation); "
            f"raise the budget to at least {longest} tokens"
        )
