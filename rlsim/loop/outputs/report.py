"""``report.md`` and its PNGs: a Gantt chart of one step per actor and the step-time breakdown.

Figures are rendered to bytes and written atomically, like every result file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlsim.io import atomic_write_bytes
from rlsim.loop.outputs.asynchronous import async_markdown
from rlsim.loop.outputs.records import PHASES
from rlsim.loop.schedules.ppo import EXPERIENCE_PHASES
from rlsim.metrics.plots import png_bytes, pyplot
from rlsim.run_results import RunResults, StepRecord

COLORS = {
    "generate": "#4C72B0",
    "score": "#DD8452",
    "update": "#55A868",
    "sync": "#C44E52",
    "idle": "#BBBBBB",
    "reference": "#8172B3",
    "values": "#937860",
    "advantages": "#DA8BC3",
    "update_actor": "#55A868",
    "update_critic": "#8C8C3C",
    "checkpoint": "#2F2F2F",  # schedule async: the trainer saving its state for --resume
}


def render_markdown(results: RunResults, figures: Sequence[str] = ()) -> str:
    """The report text from ``results`` (the ``results.json`` content); ``figures`` are PNG file names."""
    steps = results.steps
    cfg = results.config
    lines = [
        "# rlsim run",
        "",
        ("" if results.algorithm == "grpo" else f"Algorithm `{results.algorithm}`. ")
        + f"Schedule `{cfg.get('schedule')}`, policy `{cfg.get('policy', {}).get('model')}` on "
        f"`{cfg.get('policy', {}).get('backend')}`, reward `{cfg.get('reward', {}).get('model')}` on "
        f"`{cfg.get('reward', {}).get('runtime')}` x {cfg.get('reward', {}).get('replicas')}, placement "
        f"`{cfg.get('placement', {}).get('preset')}`. {steps[-1].step if steps else 0} of {cfg.get('steps')} steps done"
        + (
            f" (steps {steps[0].step}-{steps[-1].step}: its warm-up steps were not run, the actors were warm)"
            if results.warmup_steps is not None and steps and steps[0].step > 1
            else ""
        )
        + ("." if results.complete else " (run not finished)."),
        "",
        "Times in seconds. Phases overlap under `overlapped`, so each is the wall time during which it ran "
        "somewhere; `idle` is step time when no actor was working (orchestration overhead).",
        "",
        "| step | total | generate | score | update | sync | idle | overhead "
        "| rollouts gen/scored/trained | tokens | sync |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    lines += [_step_row(s) for s in steps]
    lines += _experience_rows(steps)
    lines += ["", "CPU seconds per actor and step (process accounting, children included):", ""]
    actors = sorted({a for s in steps for a in s.cpu_s})
    lines.append("| step | " + " | ".join(actors) + " |")
    lines.append("|---:|" + "---:|" * len(actors))
    for s in steps:
        lines.append(f"| {s.step} | " + " | ".join(f"{s.cpu_s.get(a, 0):.2f}" for a in actors) + " |")
    if results.async_ is not None:
        lines += async_markdown(results)
    lines += ["", f"Overall orchestration overhead (idle / step time): {100 * results.overhead_fraction:.2f}%."]
    startup = results.startup_s
    if startup:
        lines.append("Start-up, not in any step: " + ", ".join(f"{k} {v:.1f} s" for k, v in startup.items()) + ".")
    lines.append("")
    lines += [f"![{name}]({name})" for name in figures]
    return "\n".join(lines) + "\n"


def _step_row(s: StepRecord) -> str:
    """One table row; a field a hand-made or older file lacks shows as ``-``."""
    t, r = s.time_s, s.rollouts
    overhead = "-" if s.overhead_fraction is None else f"{100 * s.overhead_fraction:.1f}%"
    counts = "/".join("-" if n is None else str(n) for n in (r.generated, r.scored, r.trained))
    counts += f" ({r.dropped} dropped)" if r.dropped else ""
    return (
        f"| {s.step} | {t.total:.2f} | {t.generate:.2f} | {t.score:.2f} | {t.update:.2f} | {t.sync:.2f} | "
        f"{t.idle:.3f} | {overhead} | {counts} | {s.tokens.generated if s.tokens else '-'} | "
        f"{s.sync.method if s.sync else '-'} |"
    )


def _experience_rows(steps: Sequence[StepRecord]) -> list[str]:
    """With a reference or critic: their phases per step and the counts they add (none for GRPO)."""
    rows = [s for s in steps if s.time_s.advantages is not None]
    if not rows:
        return []
    lines = [
        "",
        "The experience roles (seconds; `update` above is the union of the last three):",
        "",
        "| step | " + " | ".join(EXPERIENCE_PHASES) + " | referenced | valued | policy loss | value loss | kl |",
        "|---:|" + "---:|" * (len(EXPERIENCE_PHASES) + 5),
    ]
    for s in rows:
        times = " | ".join(f"{getattr(s.time_s, p) or 0:.2f}" for p in EXPERIENCE_PHASES)
        train = [s.train.get(k) for k in ("policy_loss", "value_loss", "kl")]
        stats = " | ".join("-" if v is None else f"{v:.4g}" for v in train)
        lines.append(f"| {s.step} | {times} | {s.rollouts.referenced or '-'} | {s.rollouts.valued or '-'} | {stats} |")
    return lines


def gantt_png(rows: Sequence[dict[str, Any]], step: int) -> bytes:
    """A Gantt chart of ``step``'s events (timeline rows), one lane per actor, coloured by phase."""
    plt = pyplot()
    events = [r for r in rows if r["step"] == step]
    actors = sorted({r["actor"] for r in events}, key=_actor_order)
    fig, ax = plt.subplots(figsize=(10, 1 + 0.6 * max(1, len(actors))))
    for lane, actor in enumerate(actors):
        for r in (r for r in events if r["actor"] == actor):
            ax.barh(lane, r["end"] - r["start"], left=r["start"], color=COLORS.get(r["phase"], "k"), edgecolor="white")
    ax.set_yticks(range(len(actors)), actors)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since step start")
    ax.set_title(f"step {step}: work per actor")
    seen = {r["phase"] for r in events}
    shown = [p for p in COLORS if p in seen or p in PHASES and not seen & set(EXPERIENCE_PHASES)]
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[p]) for p in shown]
    ax.legend(handles, shown, loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=5, frameon=False)
    return png_bytes(fig, tight=True)


def breakdown_png(steps: Sequence[StepRecord]) -> bytes:
    """Per step: stacked bars of phase times (union) and idle, next to the step time."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(6, 2.5 + 0.8 * len(steps)), 4))
    xs = [s.step for s in steps]
    bottom = [0.0] * len(steps)
    for phase in (*PHASES, "idle"):
        vals = [getattr(s.time_s, phase) for s in steps]
        ax.bar(xs, vals, bottom=bottom, color=COLORS[phase], label=phase, width=0.35, align="edge")
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.bar(
        [x - 0.35 for x in xs],
        [s.time_s.total for s in steps],
        width=0.35,
        align="edge",
        color="#333333",
        label="step time",
    )
    ax.set_xticks(xs)
    ax.set_xlabel("step")
    ax.set_ylabel("seconds")
    ax.set_title("step time and its phases (phases may overlap)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return png_bytes(fig, tight=True)


def write_figures(out: Path, results: RunResults, rows: Sequence[dict[str, Any]]) -> list[str]:
    """Write ``gantt.png`` (last step) and ``breakdown.png``; returns their file names."""
    steps = results.steps
    if not steps:
        return []
    atomic_write_bytes(out / "gantt.png", gantt_png(rows, steps[-1].step))
    atomic_write_bytes(out / "breakdown.png", breakdown_png(steps))
    return ["gantt.png", "breakdown.png"]


def _actor_order(name: str) -> tuple[int, str]:
    return ({"rollout": 0, "trainer": 3, "critic": 2, "critic+trainer": 3}.get(name, 1), name)


def run_gantt_png(rows: Sequence[dict[str, Any]]) -> bytes:
    """Every event of the run on one axis, one lane per actor; generate bars are labelled ``g<batch>``
    and updates ``u<update>``, so generation of batch k+1 can be seen running under update k."""

    plt = pyplot()
    actors = sorted({r["actor"] for r in rows}, key=_actor_order)
    fig, ax = plt.subplots(figsize=(12, 1 + 0.6 * max(1, len(actors))))
    for lane, actor in enumerate(actors):
        for r in (r for r in rows if r["actor"] == actor):
            left = r["run_start"] + r["start"]
            ax.barh(lane, r["end"] - r["start"], left=left, color=COLORS.get(r["phase"], "k"), edgecolor="white")
            if r["phase"] in ("generate", "update") and actor in ("rollout", "trainer"):
                label = f"{'g' if r['phase'] == 'generate' else 'u'}{r['batch']}"
                ax.text(left + (r["end"] - r["start"]) / 2, lane, label, ha="center", va="center", fontsize=7)
    ax.set_yticks(range(len(actors)), actors)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the run's first step started")
    ax.set_title("async run: generation of batch k+1 (g) under update k (u)")
    shown = [*PHASES, *(["checkpoint"] if any(r["phase"] == "checkpoint" for r in rows) else [])]
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[p]) for p in shown]
    ax.legend(handles, shown, loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=5, frameon=False)
    return png_bytes(fig, tight=True)


def write_async_figures(out: Path, rows: Sequence[dict[str, Any]]) -> list[str]:
    """``async_gantt.png`` of the whole run (rows of an async run carry ``run_start``)."""
    rows = [r for r in rows if "run_start" in r]
    if not rows:
        return []
    atomic_write_bytes(out / "async_gantt.png", run_gantt_png(rows))
    return ["async_gantt.png"]
