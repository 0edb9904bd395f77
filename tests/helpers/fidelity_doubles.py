"""Fidelity metrics of a runtime that passes the default rules, shared by the tests of the fidelity cache and
of the experiment's fidelity source."""

from __future__ import annotations

METRICS = {
    "spearman": 0.995,
    "kendall_tau": 0.95,
    "pair_flip_rate": 0.015,
    "advantage_sign_flip_rate": 0.01,
    "advantage_mae": 0.02,
    "reward_mae_over_std": 0.01,
    "max_abs_diff": 0.05,
}
