"""Per-step metrics logged by verl or OpenRLHF, read into one checked, typed record per step.

The containers (console output, JSONL, W&B CSV) are read by ``records.py``, TensorBoard event files by
``tensorboard.py``; this module maps the
frameworks' key names onto the planner's phases, tells the format and the release from the keys, and
checks every value it uses before anything is allocated from it. The key names are the frameworks' own:

- ``verl``: ``verl/trainer/ppo/metric_utils.py`` (``compute_timing_metrics`` writes ``timing_s/{name}``
  for every ``marked_timer`` of ``verl/trainer/ppo/ray_trainer.py``: ``gen``, ``gen_max`` (REMAX),
  ``reward``, ``old_log_prob``, ``ref``, ``values``, ``adv``, ``update_critic``, ``update_actor``,
  ``update_weights``, ``testing``, ``save_checkpoint``, ``step``; ``compute_data_metrics`` writes
  ``response_length/{mean,max,min}`` and ``prompt_length/mean``; ``compute_throughout_metrics`` writes
  ``perf/total_num_tokens`` (prompt plus response tokens) and ``perf/throughput`` = tokens /
  (``timing_s/step`` x GPUs), from which the GPU count is read back).
  What each release logs: ``timing_s/update_weights`` only from 0.7.1 (before, the weight sync runs
  inside ``timing_s/gen`` and is fitted with it); ``timing_s/reward`` from 0.4 (0.3 runs the reward
  inside ``timing_s/adv``, fitted with the update); ``timing_s/start_profile`` from 0.5; ``testing``
  and ``save_checkpoint`` are timed inside ``timing_s/step`` up to 0.5 and after
  it from 0.6 (told apart here from the numbers). Forks without ``perf/total_num_tokens`` log
  ``global_seqlen/mean`` (``_balance_batch``: tokens per data-parallel rank), times the world size.
- ``openrlhf``: ``openrlhf/trainer/ppo_trainer.py`` (from 0.9.6: ``timing/make_experience``,
  ``timing/ppo_train``, ``timing/broadcast``, ``timing/generation`` and ``timing/step_total``, their
  sum; from 0.9.8 ``rollout/response_length_mean`` and ``rollout/num_samples``). Its W&B and
  TensorBoard loggers prefix every key with ``train/`` (``openrlhf/utils/logging_utils.py``), read the
  same. OpenRLHF logs neither prompt lengths nor the longest response: prompts count as 0 tokens and
  every response as the mean (the fit says so in the profile's notes).

Phases map onto the planner's: generation; scoring (verl ``reward``; OpenRLHF ``make_experience``,
which also holds the reference and critic forward passes); update (verl ``update_actor`` plus the
trainer-side passes ``old_log_prob``, ``ref``, ``values``, ``adv``, ``update_critic`` when logged;
OpenRLHF ``ppo_train``); sync (verl ``update_weights``, OpenRLHF ``broadcast``); validation and
checkpoint saving are periodic phases of their own (``LoggedStep.periodic``); the rest of the step is
overhead. Times in seconds, lengths in tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from rlsim.errors import RlsimError
from rlsim.io import read_user_text
from rlsim.planner.profile.logs.logged_step import (
    MAX_ROLLOUTS_PER_LOG,
    MAX_ROLLOUTS_PER_STEP,
    LoggedStep,
    Problem,
    StepValues,
    fix_text,
)
from rlsim.planner.profile.logs.records import LogRecords, Value, read_log_records
from rlsim.planner.profile.logs.tensorboard import is_event_file, read_event_records


@dataclass(frozen=True)
class LogFormat:
    """A framework's key names: ``marker`` identifies a step line; ``required`` must all be present."""

    name: str
    source: str
    marker: str
    required: tuple[str, ...]
    parse: Callable[[StepValues, LogContext], LoggedStep]
    release: Callable[[list[dict[str, Value]]], str]


@dataclass(frozen=True)
class LogContext:
    """What a step's parse needs beyond its own line: the data-parallel world size if known."""

    world_size: int | None


@dataclass
class FrameworkLog:
    """A read log: format, release (as told by its keys), steps, GPU count if the log says it, warnings."""

    path: Path
    container: str
    format: LogFormat
    release: str
    steps: list[LoggedStep]
    gpus: int | None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


_VERL_TRAINER_SIDE = ("old_log_prob", "ref", "values", "adv", "update_critic")
_VERL_PERIODIC = {"testing": "validation", "save_checkpoint": "checkpoint"}


def _verl(s: StepValues, ctx: LogContext) -> LoggedStep:
    prompt, response = s.get("prompt_length/mean", "length"), s.get("response_length/mean", "length")
    if prompt + response <= 0:
        raise Problem(
            f"{s.where} {s.line}: prompt_length/mean + response_length/mean is 0; the rollouts cannot be counted: "
            "fix or delete that line"
        )
    if not s.has("perf/total_num_tokens") and not s.has("global_seqlen/mean"):
        raise Problem(
            f"{s.where} {s.line}: perf/total_num_tokens is missing (and global_seqlen/mean, which forks log instead); "
            f"{fix_text('tokens')}"
        )
    if s.has("perf/total_num_tokens") or ctx.world_size is None:
        tokens = s.get("perf/total_num_tokens", "tokens")
    else:  # forks without it: tokens per data-parallel rank x ranks (exact where both are logged)
        tokens = s.get("global_seqlen/mean", "tokens") * ctx.world_size
    rollouts = tokens / (prompt + response)
    if rollouts > MAX_ROLLOUTS_PER_STEP:
        raise Problem(
            f"{s.where} {s.line}: perf/total_num_tokens {tokens:g} over {prompt + response:g} tokens per rollout is "
            f"{rollouts:.3g} rollouts, beyond {MAX_ROLLOUTS_PER_STEP}: fix or delete that line"
        )
    maximum = s.get("response_length/max", "length", default=response)
    if maximum < response:
        raise Problem(
            f"{s.where} {s.line}: response_length/max {maximum:g} is below response_length/mean {response:g}: "
            "fix or delete that line"
        )
    gen = s.get("timing_s/gen", "time") + s.get("timing_s/gen_max", "time", default=0.0)
    update = s.get("timing_s/update_actor", "time") + sum(
        s.get(f"timing_s/{k}", "time", default=0.0) for k in _VERL_TRAINER_SIDE
    )
    score = s.get("timing_s/reward", "time", default=0.0)
    sync = s.get("timing_s/update_weights", "time", default=0.0)
    periodic = tuple(
        (name, s.get(f"timing_s/{key}", "time")) for key, name in _VERL_PERIODIC.items() if s.has(f"timing_s/{key}")
    )
    return LoggedStep(
        line=s.line,
        rollouts=max(1, round(rollouts)),
        prompt_mean=prompt,
        response_mean=response,
        response_max=maximum,
        gen_s=gen,
        score_s=score,
        update_s=update,
        sync_s=sync,
        step_s=s.get("timing_s/step", "time"),
        periodic=periodic,
    )


def _verl_release(records: list[dict[str, Value]]) -> str:
    keys = set().union(*records) if records else set()
    if "timing_s/update_weights" in keys:
        out = "0.7.1 or later (timing_s/update_weights)"
    elif "timing_s/start_profile" in keys:
        out = "0.5 to 0.7.0 (timing_s/start_profile, no timing_s/update_weights: weight sync inside timing_s/gen)"
    elif "timing_s/reward" in keys:
        out = "0.4 (timing_s/reward, no timing_s/start_profile: weight sync inside timing_s/gen)"
    else:
        out = "0.3 or earlier (no timing_s/reward: weight sync inside timing_s/gen)"
    if "perf/total_num_tokens" not in keys:
        out += "; tokens from global_seqlen/mean x world size"
    return out


def _openrlhf(s: StepValues, ctx: LogContext) -> LoggedStep:
    if not s.has("rollout/num_samples"):
        raise Problem(
            f"{s.where} {s.line}: rollout/num_samples is missing (OpenRLHF logs it from 0.9.8; 0.9.6 and 0.9.7 "
            "log phase times without it, so the rollouts cannot be counted): give a log of OpenRLHF 0.9.8 or later"
        )
    response = s.get("rollout/response_length_mean", "length")
    return LoggedStep(
        line=s.line,
        rollouts=round(s.get("rollout/num_samples", "count")),
        prompt_mean=0.0,
        response_mean=response,
        response_max=response,
        gen_s=s.get("timing/generation", "time"),
        score_s=s.get("timing/make_experience", "time"),
        update_s=s.get("timing/ppo_train", "time"),
        sync_s=s.get("timing/broadcast", "time"),
        step_s=s.get("timing/step_total", "time"),
    )


def _openrlhf_release(records: list[dict[str, Value]]) -> str:
    return "0.9.8 or later (timing/step_total and rollout/num_samples)"


FORMATS: dict[str, LogFormat] = {
    "verl": LogFormat(
        name="verl",
        source="verl/trainer/ppo/metric_utils.py + ray_trainer.py",
        marker="timing_s/gen",
        required=(
            "timing_s/gen",
            "timing_s/update_actor",
            "timing_s/step",
            "response_length/mean",
            "prompt_length/mean",
            "perf/total_num_tokens (or global_seqlen/mean)",
        ),
        parse=_verl,
        release=_verl_release,
    ),
    "openrlhf": LogFormat(
        name="openrlhf",
        source="openrlhf/trainer/ppo_trainer.py",
        marker="timing/generation",
        required=(
            "timing/generation",
            "timing/make_experience",
            "timing/ppo_train",
            "timing/broadcast",
            "timing/step_total",
            "rollout/response_length_mean",
            "rollout/num_samples",
        ),
        parse=_openrlhf,
        release=_openrlhf_release,
    ),
}


def accepted_formats() -> str:
    """One line per format: its name and the keys it needs (for error messages and the docs)."""
    return "; ".join(f"{f.name} (keys {', '.join(f.required)})" for f in FORMATS.values())


def read_framework_log(path: str | Path) -> tuple[LogFormat, list[LoggedStep]]:
    """The format of the log at ``path`` and its steps (``load_framework_log`` for the rest)."""
    log = load_framework_log(path)
    return log.format, log.steps


def load_framework_log(path: str | Path, world_size: int | None = None) -> FrameworkLog:
    """The log at ``path`` read, checked and mapped; one one-line ``RlsimError`` naming the first problem.

    ``world_size``: the run's GPUs when the user gave them (tokens of forks without
    ``perf/total_num_tokens`` are ``global_seqlen/mean`` x this).
    """
    p = Path(path)
    if is_event_file(p):
        got = read_event_records(p)
    else:
        got = read_log_records(p, read_user_text(p, "framework log"))
    records = [(line, _normalised(v)) for line, v in got.records]
    fmt = _detect(records, p, got)
    step_records = [(line, v) for line, v in records if fmt.marker in v]
    gpus = _logged_gpus([v for _, v in step_records])
    world = world_size or gpus
    warnings = list(got.warnings)
    if records and fmt.marker not in records[-1][1] and _partial_step(records[-1][1], fmt):
        warnings.append(
            f"the last record ({got.where} {records[-1][0]}) has step keys but no {fmt.marker} "
            "(incomplete: a run stopped mid-write?): dropped it"
        )
    if fmt.name == "verl" and world is None and not any("perf/total_num_tokens" in v for _, v in step_records):
        raise RlsimError(
            f"{p}: the log has no perf/total_num_tokens (a verl fork); its tokens are global_seqlen/mean x the "
            "world size, which the log does not say: give --gpus N"
        )
    steps: list[LoggedStep] = []
    problems: list[str] = []
    for k, (line, values) in enumerate(step_records):
        try:
            steps.append(fmt.parse(StepValues(values, line, got.where), LogContext(world)))
        except Problem as err:
            if k == len(step_records) - 1 and " is missing;" in str(err) and problems == []:
                warnings.append(
                    f"the last step ({got.where} {line}) is incomplete (a run stopped mid-write?): dropped it"
                )
                continue
            problems.append(str(err))
    if problems:
        more = f" (and {len(problems) - 1} more problem(s) like it)" if len(problems) > 1 else ""
        raise RlsimError(f"{p} {problems[0]}{more}")
    steps = _place_periodic(steps)
    _check_sums(p, steps, fmt, got.where)
    total = sum(s.rollouts for s in steps)
    if total > MAX_ROLLOUTS_PER_LOG:
        raise RlsimError(
            f"{p}: {len(steps)} steps of {total} rollouts in all, more than {MAX_ROLLOUTS_PER_LOG} this fit replays; "
            "give a part of the log (e.g. its last 200 steps)"
        )
    release = fmt.release([v for _, v in step_records])
    notes = []
    if fmt.name == "verl" and "update_weights" not in release:
        notes.append("weight sync: inside timing_s/gen in this release (fitted with generation; sync set to 0)")
    return FrameworkLog(p, got.container, fmt, release, steps, gpus, warnings, notes)


def _partial_step(values: dict[str, Value], fmt: LogFormat) -> bool:
    return any(k.split(" ")[0] in values for k in fmt.required)


def _normalised(values: dict[str, Value]) -> dict[str, Value]:
    """OpenRLHF's W&B/TensorBoard keys without their ``train/`` prefix (``eval/`` ones left out)."""
    out = {}
    for k, v in values.items():
        if k.startswith("eval/"):
            continue
        out[k[6:] if k.startswith("train/") else k] = v
    return out


def _logged_gpus(records: list[dict[str, Value]]) -> int | None:
    """verl's GPU count read back from ``perf/throughput`` = tokens / (step time x GPUs), if consistent."""
    seen = []
    for v in records:
        tokens, time, rate = v.get("perf/total_num_tokens"), v.get("perf/time_per_step"), v.get("perf/throughput")
        if tokens and time and rate and all(math.isfinite(x) and x > 0 for x in (tokens, time, rate)):
            seen.append(tokens / (time * rate))
    if not seen:
        return None
    n = round(sorted(seen)[len(seen) // 2])
    if n < 1 or n > 1_000_000 or sum(abs(x / n - 1) < 0.02 for x in seen) < 0.8 * len(seen):
        return None
    return n


def _place_periodic(steps: list[LoggedStep]) -> list[LoggedStep]:
    """Validation/checkpoint times inside ``timing_s/step`` (verl up to 0.5) or after it (from 0.6)?
    Inside when the step's time beyond its other phases holds them on most steps that have them."""
    with_periodic = [s for s in steps if s.periodic_s > 0]
    if not with_periodic:
        return steps
    inside = sum(s.step_s - _phases(s) >= 0.9 * s.periodic_s for s in with_periodic) * 2 >= len(with_periodic)
    if inside:
        return steps
    return [s if not s.periodic else replace(s, periodic_in_step=False) for s in steps]


def _phases(s: LoggedStep) -> float:
    return s.gen_s + s.score_s + s.update_s + s.sync_s


def _check_sums(path: Path, steps: list[LoggedStep], fmt: LogFormat, where: str) -> None:
    step_key = "timing_s/step" if fmt.name == "verl" else "timing/step_total"
    for s in steps:
        held = _phases(s) + (s.periodic_s if s.periodic_in_step else 0.0)
        if s.step_s < 0.98 * held - 0.05:
            raise RlsimError(
                f"{path} {where} {s.line}: {step_key} {s.step_s:g} s is less than the phases it holds ({held:.4g} s): "
                "the line mixes two steps or was edited: fix or delete that line"
            )


def _detect(records: list[tuple[int, dict[str, Value]]], path: Path, got: LogRecords) -> LogFormat:
    found = [f for f in FORMATS.values() if any(f.marker in m for _, m in records)]
    if len(found) == 1:
        return found[0]
    if found:
        raise RlsimError(
            f"{path} mixes formats ({', '.join(f.name for f in found)}); give one framework's log per file"
        )
    hint = ""
    if got.container == "openrlhf-console" or any("policy_loss" in m for _, m in records):
        hint = " OpenRLHF logs per-phase times (timing/...) from 0.9.6 and rollout/num_samples from 0.9.8: upgrade."
    raise RlsimError(
        f"{path}: unknown log format ({got.container}: no line has "
        f"{' or '.join(f.marker for f in FORMATS.values())}).{hint} Accepted formats: {accepted_formats()}"
    )
