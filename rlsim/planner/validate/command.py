"""``rlsim plan validate`` without argparse: load the set, check everything, run, show the table.

Every input (the set, each loop config, the profile, each prediction) is checked before the first
loop starts, so a bad entry costs seconds, not an engine start.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import rlsim
from rlsim.errors import RlsimError
from rlsim.fingerprint import machine_fingerprint, measure_gemm
from rlsim.io import atomic_write_json
from rlsim.planner.measure.loop_runner import LoopRunner, RealLoopRunner
from rlsim.planner.measure.loop_set import LoopCase, LoopSet, load_loop_set, resolve_cases, resolve_path
from rlsim.planner.profile.machine_check import check_here
from rlsim.planner.profile.schema import Profile, load_profile
from rlsim.planner.validate.anchor import Anchor, anchor_from_profile, resolve_anchor
from rlsim.planner.validate.compare import run_validation
from rlsim.planner.validate.predict import case_profile, predict_step
from rlsim.progress import make_console


def prepare_validation(
    path: Path, overrides: Sequence[str], profile_path: Path | None, anchored: bool = True
) -> tuple[list[LoopCase], Profile, Path, LoopSet, Anchor | None]:
    """The cases, the profile and its path, the set itself and its anchor (None: the set names none, or
    ``anchored`` is False); raises RlsimError on bad input."""
    loop_set, base_dir = load_loop_set(path, overrides)
    if profile_path is None:
        if loop_set.profile is None:
            raise RlsimError(f"{path} names no profile; add `profile: PATH` to it or pass --profile PATH")
        profile_path = resolve_path(base_dir, loop_set.profile)
    profile = load_profile(profile_path)
    cases = resolve_cases(loop_set, base_dir, source=str(path))
    for case in cases:  # a config the planner cannot simulate fails here, before any loop starts
        case_prof = case_profile(profile, case.config.reward.runtime, case.profile_runtime)
        predict_step(case.config, case_prof, replay=[loop_set.warmup_steps + 1])
    anchor = None
    names = [c.name for c in cases]
    if anchored and loop_set.anchor is not None:
        anchor = resolve_anchor(loop_set.anchor, base_dir, names, str(path), profile.calibration)
    elif anchored and profile.anchor is not None:
        anchor = anchor_from_profile(profile.anchor, profile_path, names, source=str(path))
    if anchor is not None:
        predict_step(anchor.case.config, profile, replay=[anchor.warmup_steps + 1])
    return cases, profile, profile_path, loop_set, anchor


def validate_command(
    path: Path,
    overrides: Sequence[str],
    profile_path: Path | None,
    out: Path,
    json_path: Path,
    reuse: bool,
    runner: LoopRunner | None = None,
    console: Console | None = None,
    anchored: bool = True,
) -> dict[str, Any]:
    """Run the validation set at ``path``; writes ``json_path`` after every configuration.

    ``anchored`` (``--no-anchor`` turns it off): interleave the set's anchor with its configurations
    and report anchored errors beside the raw ones (``validate/anchor.py``)."""
    console = console or make_console(stderr=True)
    cases, profile, profile_path, loop_set, anchor = prepare_validation(path, overrides, profile_path, anchored)
    if anchored and anchor is None:
        console.print(
            f"[yellow]note:[/yellow] {path} names no anchor and the profile keeps none, so only raw "
            "errors are reported, and the host's drift is in them; add `anchor: {set: CALIBRATION_SET.yaml, "
            "config: NAME}` (docs/planner.md)"
        )
    if runner is None:
        runner = RealLoopRunner(console=console, quiet=loop_set.quiet)
    meta = {
        "rlsim_version": rlsim.__version__,
        "validation_set": str(path),
        "command": " ".join(["rlsim", *sys.argv[1:]]) if sys.argv and sys.argv[0].endswith("rlsim") else None,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "profile": {
            "path": str(profile_path),
            "hardware_kind": profile.hardware_kind,
            "illustrative": profile.illustrative,
            "notes": profile.notes,
        },
        "warmup_steps": loop_set.warmup_steps,
        "quiet": loop_set.quiet.model_dump() if loop_set.quiet else None,
        "disturbed_above": loop_set.disturbed_above,
        "anchoring": _anchoring(anchor, anchored, from_set=loop_set.anchor is not None),
        "error_definition": (
            "per entry's metric: step_time_s: predicted_step_s / measured_step_s - 1 (medians over the measured "
            "steps); rollouts_trained_per_hour (schedule async): predicted / measured rollouts trained per hour "
            "- 1 (over the measured steps)"
        ),
    }
    here = machine_fingerprint(_gemm_like(profile))
    machine = check_here(profile, profile_path, here)
    meta["machine_warning"] = machine
    meta["machine"] = here
    if machine:
        console.print(f"[yellow]warning:[/yellow] {machine}")
    t0 = time.perf_counter()
    done = 0

    def note(message: str, entry: dict[str, Any] | None) -> None:
        nonlocal done
        done += entry is not None
        console.print(f"[{done}/{len(cases)}] {message}")

    try:
        report = run_validation(
            cases,
            profile,
            runner,
            out,
            json_path,
            loop_set.warmup_steps,
            reuse,
            note,
            meta,
            loop_set.disturbed_above,
            anchor,
        )
    finally:
        runner.close()
    report["wall_s"] = round(time.perf_counter() - t0, 1)
    report["sessions"] = getattr(runner, "sessions", None)

    atomic_write_json(json_path, report)
    return report


def _anchoring(anchor: Anchor | None, anchored: bool, from_set: bool) -> str:
    """What the report says of anchoring: on (whose anchor), or off and why."""
    if anchor is not None:
        return "on (the set's anchor)" if from_set else "on (the profile's anchor)"
    return "off (--no-anchor)" if not anchored else "off (neither the set nor the profile names an anchor)"


def _gemm_like(profile: Profile) -> dict[str, float]:
    """This machine's GEMM rates at the thread counts the profile recorded (comparable keys), if any."""
    keys = list((profile.machine or {}).get("gemm_gflops") or {})
    threads = sorted({int(k.rsplit("_", 1)[1][:-1]) for k in keys if k.startswith("cpu_fp32_n1024_")})
    return measure_gemm("cpu", threads) if threads else {}


def validation_table(report: dict[str, Any]) -> Table:
    """One row per configuration: predicted and measured step time and rollouts/hour, and the error."""
    groups = report.get("by_algorithm") or {}
    table = Table(
        title=f"plan validate: median |error| {report['median_abs_error']:.1%}, max {report['max_abs_error']:.1%}"
        + _anchored_title(report),
        caption=_caption(report, groups),
    )
    for col in (
        "config",
        "algorithm",
        "metric",
        "schedule",
        "placement",
        "runtime",
        "rollouts",
        "predicted s",
        "measured s",
        "error",
        "anchored",
        "all-steps error",
        "pred rollouts/h",
        "meas rollouts/h",
        "others' CPU",
    ):
        table.add_column(
            col,
            justify="left" if col in ("config", "algorithm", "metric", "schedule", "placement", "runtime") else "right",
            no_wrap=True,
        )
    for e in report["configs"]:
        colour = "green" if abs(e["error"]) <= 0.10 else "red"
        table.add_row(
            e["name"],
            e.get("algorithm", "grpo"),
            "rollouts/h" if e.get("metric") == "rollouts_trained_per_hour" else "step s",
            e.get("schedule", ""),
            e.get("placement", ""),
            e.get("runtime", ""),
            f"{e['rollouts_per_step']:g}",
            f"{e['predicted_step_s']:.2f}",
            f"{e['measured_step_s']:.2f}",
            f"[{colour}]{e['error']:+.1%}[/{colour}]",
            "" if e.get("anchored_error") is None else f"{e['anchored_error']:+.1%}",
            f"{e.get('error_all_steps', e['error']):+.1%}",
            f"{e['predicted_rollouts_per_hour']:,.0f}",
            f"{e['measured_rollouts_per_hour']:,.0f}",
            _shares(e),
        )
    return table


def _caption(report: dict[str, Any], groups: dict[str, Any]) -> str | None:
    """Per algorithm (when there is more than GRPO), and what the anchor says about uneven drift."""
    parts = []
    if len(groups) > 1 or "grpo" not in groups:
        parts += [
            f"{name} ({g['configs']}): median |error| {g['median_abs_error']:.1%}, max {g['max_abs_error']:.1%}"
            for name, g in groups.items()
        ]
    uneven = (report.get("anchor") or {}).get("uneven")
    if uneven:
        parts.append(f"note: {uneven}")
    return "; ".join(parts) or None


def _anchored_title(report: dict[str, Any]) -> str:
    """``; anchored: median 3.1%, max 6.0%; floor 2.0% [1.1%, 2.9%]; drift +8.0%`` (empty when not anchored)."""
    anchored, anchor = report.get("anchored"), report.get("anchor")
    if not anchored or not anchor:
        return ""
    floor = anchor.get("floor") or {}
    ci = f" [{floor['ci_low']:.1%}, {floor['ci_high']:.1%}]" if floor.get("ci_low") is not None else ""
    text = f"; anchored on {anchor['config']}: median {anchored['median_abs_error']:.1%}"
    text += f", max {anchored['max_abs_error']:.1%}"
    if floor:
        text += f"; identical-run floor {floor['mean_abs_change']:.1%}{ci}"
        if floor.get("anchored"):
            text += f" (anchored {floor['anchored']['mean_abs_change']:.1%})"
    if anchor.get("drift") is not None:
        text += f"; host drift {anchor['drift']:+.1%}"
    return text


def _shares(entry: dict[str, Any]) -> str:
    """Other programs' share of the cores per measured step, dropped steps marked with a star."""
    shares = entry.get("foreign_cpu_share") or {}
    dropped = set(entry.get("dropped_steps") or [])
    return " ".join(f"{v:.0%}" + ("*" if int(k) in dropped else "") for k, v in shares.items())
