"""Batching strategies: how texts are grouped into forward passes.

Offline batchers (all texts known up front) plan from token lengths and register by name:
``fixed``, ``sorted``, ``token-budget``. ``score_texts(scorer, texts, batcher)`` runs a plan and
returns rewards in the caller's order plus a ``BatchReport`` (padding waste, per-batch latency).
The online ``DynamicBatcher`` (flush at a size or a wait; ``rlsim serve``) lives in ``rlsim.batching.dynamic`` and
is registered as ``dynamic`` with ``online=True``, which the offline helpers leave out.
"""

from rlsim.batching.base import (
    BATCHERS,
    Batcher,
    BatcherInfo,
    PlanStats,
    batcher_names,
    make_batcher,
    padding_waste,
    plan_stats,
    register_batcher,
)
from rlsim.batching.dynamic import DynamicBatcher
from rlsim.batching.fixed_size import FixedBatcher, SortedBatcher
from rlsim.batching.scoring import BatchReport, score_texts, token_lengths
from rlsim.batching.token_budget import TokenBudgetBatcher

__all__ = [
    "BATCHERS",
    "BatchReport",
    "Batcher",
    "BatcherInfo",
    "DynamicBatcher",
    "FixedBatcher",
    "PlanStats",
    "SortedBatcher",
    "batcher_names",
    "TokenBudgetBatcher",
    "make_batcher",
    "padding_waste",
    "plan_stats",
    "register_batcher",
    "score_texts",
    "token_lengths",
]
