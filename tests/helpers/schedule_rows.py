"""Hand-made measurement rows of a PPO contention experiment and of an async one, with answers known by hand.

PPO (two runtimes on 2 cores, 4 repeats). Per together step the baseline ``eager`` takes 20 s (40 pool
core-s): generation 12, scoring 10, reference 4, critic 4, trainer 6, orchestration 0.3, kernel 0.1,
idle the rest (3.6). ``fast`` scores for 6 core-s less and its step is 0.5 s shorter; where the freed 6
core-s go is given by ``moved`` (core-s per step each destination takes), and idle takes what the pool's
identity leaves. ``noise`` adds per-repeat offsets to the critic, so its interval has a known width.

Async (3 repeats): per together run (4 updates) rollouts trained per hour, mean staleness and the
trainer's idle fraction per runtime, as given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.helpers.recorded import row

POOL_CORES = 2
BASE = {"generate": 12.0, "score": 10.0, "reference": 4.0, "critic": 4.0, "update": 6.0}
REST = {"orchestration": 0.3, "idle_scorers": 0.0, "other": 0.0, "kernel": 0.1}
ROLE_OF = {"rollout": "generate", "reference": "reference", "critic": "critic", "trainer": "update"}


def _pool(core_s: dict[str, float], step_s: float) -> dict[str, Any]:
    pool = POOL_CORES * step_s
    core_s = {**core_s, **REST}
    core_s["idle"] = pool - sum(core_s.values())
    return {
        "seconds": step_s,
        "cores": POOL_CORES,
        "core_s": core_s,
        "pool_core_s": pool,
        "accounted_core_s": pool,
        "residual_fraction": 0.0,
        "within_5pct": True,
        "checked": True,
        "notes": [],
    }


def together(runtime: str, repeat: int, core_s: dict[str, float], step_s: float) -> dict[str, Any]:
    figures = {"step_s": step_s, "score_core_s": core_s["score"], "gen_tokens_per_s": 100.0}
    figures.update({f"{g}_core_s": v for g, v in core_s.items() if g != "score"})
    return {
        "condition": "together",
        "runtime": runtime,
        "repeat": repeat,
        "step": 1,
        "figures": figures,
        "pool": _pool(core_s, step_s),
    }


def _alone(runtime: str, repeat: int) -> list[dict[str, Any]]:
    return [
        row(runtime, "gen_alone", repeat, {"gen_tokens_per_s": 120.0, "gen_core_s_per_rollout": 0.5}),
        row(runtime, "score_alone", repeat, {"score_rollouts_per_s": 40.0, "score_core_s": 2.0}),
    ]


def ppo_rows(
    moved: dict[str, float], step_saved_s: float = 0.5, noise: Sequence[float] = (0.1, -0.1, 0.2, -0.2)
) -> list[dict[str, Any]]:
    """``moved``: core-s per step the fast runtime's rollout/reference/critic/trainer take more than the
    baseline's; ``noise[r]`` is added to the critic's in repeat r."""
    out = []
    for r, jitter in enumerate(noise):
        out.append(together("eager", r, dict(BASE), 20.0))
        fast = {**BASE, "score": BASE["score"] - 6.0}
        for dest, extra in moved.items():
            fast[ROLE_OF[dest]] += extra
        fast["critic"] += jitter
        out.append(together("fast", r, fast, 20.0 - step_saved_s))
        out += _alone("eager", r) + _alone("fast", r)
    return out


def async_rows(figures: dict[str, dict[str, Sequence[float]]], updates: int = 4) -> list[dict[str, Any]]:
    """``figures``: runtime -> async figure -> one value per repeat (rollouts_trained_per_hour,
    mean_staleness, trainer_idle_fraction); scoring costs 3 core-s per update for eager, 1 for the rest."""
    out = []
    for runtime, per_figure in figures.items():
        score = 3.0 if runtime == "eager" else 1.0
        for r in range(len(next(iter(per_figure.values())))):
            per_update = {"generate": BASE["generate"], "score": score, "update": BASE["update"]}
            core_s = {k: v * updates for k, v in per_update.items()}
            rec = together(runtime, r, core_s, 10.0 * updates)
            rec["figures"] = {
                "step_s": 10.0,
                "score_core_s": score,
                "rollout_idle_fraction": 0.1,
                "dropped_stale": 0.0,
                "tokens_trained_per_hour": 1000.0,
                **{k: float(v[r]) for k, v in per_figure.items()},
            }
            rec["updates"] = updates
            out += [rec] + _alone(runtime, r)
    return out
