"""What ``rlsim plan`` shows: a ranked rich table, the JSON document, and two PNG plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from rlsim.metrics.plots import save_png, subplots
from rlsim.planner.sim.evaluate import Evaluation
from rlsim.planner.sim.step import CRITICAL_PATH

ILLUSTRATIVE_WARNING = (
    "the profile is ILLUSTRATIVE (example numbers, not measured): these predictions show how "
    "the planner works, not what your hardware does; measure one with `rlsim profile`"
)


def ranked_table(ranked: list[Evaluation], title: str, limit: int = 15, target: float | None = None) -> Table:
    """The best ``limit`` placements, best first, one knob per column."""
    table = Table(title=title, show_lines=False)
    columns = (
        "#",
        "runtime",
        "batcher",
        "placement",
        "replicas/node",
        "schedule",
        "step s",
        "rollouts/h",
        "staleness",
        "per GPU-h",
        "gen util",
        "score util",
        "nodes/GPUs/cores",
        "bottleneck",
    )
    for col in columns:
        table.add_column(
            col, justify="left" if col in ("runtime", "batcher", "placement", "schedule") else "right", no_wrap=True
        )
    for i, ev in enumerate(ranked[:limit], start=1):
        spec, used = ev.spec, ev.resources.units_used()
        where = "colocated" if spec.colocated else f"split {spec.scoring_share:.0%}"
        if spec.nodes:
            where += f", {spec.nodes} nodes"
        if spec.tp * spec.pp > 1:
            where += f", tp{spec.tp}" + (f"pp{spec.pp}" if spec.pp > 1 else "")
        if spec.train_nodes:
            where += f", train on {spec.train_nodes} nodes"
        miss = target is not None and ev.step_time_s > target
        table.add_row(
            str(i),
            spec.runtime,
            spec.batcher.label(),
            where,
            str(spec.replicas_per_node),
            spec.schedule_label(),
            f"{ev.step_time_s:.2f}" + (" miss" if miss else ""),
            f"{ev.rollouts_per_hour:,.0f}",
            f"{ev.extra['async']['mean_staleness']:.2f}" if "async" in ev.extra else "-",
            f"{ev.rollouts_per_hour / used['gpus']:,.0f}" if used["gpus"] else "-",
            f"{ev.utilisation['generation']:.0%}",
            f"{ev.utilisation['scoring']:.0%}",
            f"{used['nodes']:g}/{used['gpus']:g}/{used['cores']:g}",
            ev.bottleneck,
        )
    return table


def print_plan(console: Console, chosen: Evaluation, heading: str) -> None:
    """A few lines on the chosen plan: step time, breakdown, bottleneck, utilisation."""
    t = chosen.time_s
    console.print(f"[bold]{heading}[/bold]: {chosen.spec.label()}")
    console.print(
        f"  step {chosen.step_time_s:.2f} s (+/- {chosen.step_time_std_s:.2f} over {len(chosen.steps)} steps), "
        f"{chosen.rollouts_per_hour:,.0f} rollouts/hour"
    )
    if "async" in chosen.extra:  # pipelined: the stages overlap, no critical path runs through a step
        print_async(console, chosen.extra["async"])
    else:
        console.print(
            "  critical path: "
            + ", ".join(f"{k} {t[k]:.2f} s" for k in CRITICAL_PATH)
            + f"  (scorers busy {t['score']:.2f} s in all)"
        )
    console.print(f"  bottleneck: {chosen.bottleneck} - {chosen.bottleneck_detail}")
    console.print("  utilisation: " + ", ".join(f"{k} {v:.0%}" for k, v in chosen.utilisation.items()))


def print_async(console: Console, a: dict[str, Any]) -> None:
    """An async plan's throughput, staleness and idle shares (``sim.asynchronous.evaluate.async_summary``)."""
    hist = ", ".join(f"{n} at {k}" for k, n in a["staleness_histogram"].items()) or "none"
    t = a["rollouts_total"]
    console.print(
        f"  async (max_staleness {a['max_staleness']}, queue {a['queue_size']} rollouts): "
        f"{a['steady_rollouts_trained_per_hour']:,.0f} rollouts trained/hour in steps {a['steady_steps'][0]}-"
        f"{a['steady_steps'][1]} "
        f"({a['rollouts_trained_per_hour']:,.0f} over the whole {a['wall_s']:.1f} s run); staleness: {hist} "
        f"(mean {a['mean_staleness']:.2f})"
    )
    console.print(
        f"  idle: trainer {a['trainer_idle_fraction']:.0%}, rollout worker {a['rollout_idle_fraction']:.0%}; "
        f"engine paused {a['weight_sync_pause_s']:.2f} s for weight loads; rollouts {t['generated']} generated = "
        f"{t['trained']} trained + {t['dropped_stale']} dropped as stale + {t['unfinished_at_end']} unfinished"
    )
    for line in a.get("assumptions", []):
        console.print(f"  assumed: {line}")


def plot_share_curves(ranked: list[Evaluation], path: Path) -> Path:
    """Step time vs scoring share of each node, one line per runtime (best over the other knobs)."""
    import matplotlib.ticker

    fig, ax = subplots(7, 4.2)
    runtimes = sorted({ev.spec.runtime for ev in ranked})
    for runtime in runtimes:
        best: dict[float, float] = {}
        colocated = [ev.step_time_s for ev in ranked if ev.spec.runtime == runtime and ev.spec.colocated]
        for ev in ranked:
            if ev.spec.runtime == runtime and not ev.spec.colocated:
                share = ev.spec.scoring_share
                best[share] = min(best.get(share, float("inf")), ev.step_time_s)
        line = None
        if best:
            xs = sorted(best)
            (line,) = ax.plot(xs, [best[x] for x in xs], marker="o", label=f"{runtime} (split)")
        if colocated:
            color = line.get_color() if line is not None else None
            ax.axhline(min(colocated), linestyle="--", color=color, alpha=0.7, label=f"{runtime} (colocated)")
    ax.set_xlabel("scoring share of each node's scorer-device units")
    ax.set_ylabel("predicted step time (s)")
    illustrative = any(ev.illustrative for ev in ranked)
    ax.set_title(
        "Step time vs scoring share (best over batchers, replicas, schedules)"
        + ("\n[ILLUSTRATIVE profile: not measured]" if illustrative else ""),
        fontsize=10,
    )
    ax.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_png(fig, path, tight=True)


def plot_plan(chosen: Evaluation, path: Path) -> Path:
    """Utilisation per activity and the step-time breakdown of the chosen plan."""
    fig, (left, right) = subplots(9, 3.8, ncols=2)
    util = {k: v for k, v in chosen.utilisation.items() if k != "generation_units_overall"}
    left.bar(list(util), [v * 100 for v in util.values()], color=["#4c72b0", "#dd8452", "#55a868"])
    left.set_ylim(0, 100)
    left.set_ylabel("busy share of the step (%)")
    left.set_title("Utilisation")
    bottom = 0.0
    for phase in CRITICAL_PATH:
        value = chosen.time_s[phase]
        right.bar(["step"], [value], bottom=bottom, label=phase)
        bottom += value
    right.set_ylabel("seconds")
    right.set_title(f"Critical path ({chosen.step_time_s:.1f} s)")
    right.legend(fontsize=8)
    fig.suptitle(chosen.spec.label() + (" [ILLUSTRATIVE profile]" if chosen.illustrative else ""), fontsize=9)
    return save_png(fig, path, tight=True)
