"""Per-step metrics logged by verl or OpenRLHF (JSONL), read into one typed record per step.

Accepted formats, one JSON object per line (a flat metrics map, or ``{"step": N, "data": {...}}`` as
file loggers write it); lines without the format's generation key (validation records) are skipped.
The key names are the frameworks' own:

- ``verl``: ``verl/trainer/ppo/metric_utils.py`` (``compute_timing_metrics`` writes ``timing_s/{name}``
  for every ``marked_timer`` of ``ray_trainer.py``: ``gen``, ``reward``, ``old_log_prob``, ``ref``,
  ``values``, ``adv``, ``update_critic``, ``update_actor``, ``update_weights``, ``step``;
  ``compute_data_metrics`` writes ``response_length/{mean,max,min}`` and ``prompt_length/mean``;
  ``compute_throughout_metrics`` writes ``perf/total_num_tokens``, prompt plus response tokens).
- ``openrlhf``: ``openrlhf/trainer/ppo_trainer.py`` (``train_step`` writes ``timing/make_experience``,
  ``timing/ppo_train``, ``timing/broadcast``; the trainer adds ``timing/generation`` and
  ``timing/step_total``; ``_compute_rollout_stats`` writes ``rollout/response_length_mean`` and
  ``rollout/num_samples``). OpenRLHF logs neither prompt lengths nor the longest response: prompts
  count as 0 tokens and every response as the mean (the fit says so in the profile's notes).

Phases map onto the planner's: generation; scoring (verl ``reward``; OpenRLHF ``make_experience``,
which also holds the reference and critic forward passes); update (verl ``update_actor`` plus the
trainer-side passes ``old_log_prob``, ``ref``, ``values``, ``adv``, ``update_critic`` when logged;
OpenRLHF ``ppo_train``); sync (verl ``update_weights``, OpenRLHF ``broadcast``); the rest of the step
is overhead. Times in seconds, lengths in tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlsim.errors import RlsimError
from rlsim.io import read_user_text


@dataclass(frozen=True)
class LoggedStep:
    """One logged RL step: ``rollouts`` sequences, mean prompt/response lengths, the longest response,
    and the seconds of each planner phase (``step_s`` as logged, the others as mapped above)."""

    line: int
    rollouts: int
    prompt_mean: float
    response_mean: float
    response_max: float
    gen_s: float
    score_s: float
    update_s: float
    sync_s: float
    step_s: float


@dataclass(frozen=True)
class LogFormat:
    """A framework's key names: ``marker`` identifies a step line; ``required`` must all be present."""

    name: str
    source: str
    marker: str
    required: tuple[str, ...]
    parse: Callable[[dict[str, float], int], LoggedStep]


_VERL_TRAINER_SIDE = ("old_log_prob", "ref", "values", "adv", "update_critic")


def _verl(m: dict[str, float], line: int) -> LoggedStep:
    prompt, response = m["prompt_length/mean"], m["response_length/mean"]
    if prompt + response <= 0:
        raise RlsimError(f"line {line}: prompt_length/mean + response_length/mean is 0; cannot count the rollouts")
    update = m["timing_s/update_actor"] + sum(m.get(f"timing_s/{k}", 0.0) for k in _VERL_TRAINER_SIDE)
    return LoggedStep(
        line=line,
        rollouts=max(1, round(m["perf/total_num_tokens"] / (prompt + response))),
        prompt_mean=prompt,
        response_mean=response,
        response_max=m.get("response_length/max", response),
        gen_s=m["timing_s/gen"],
        score_s=m.get("timing_s/reward", 0.0),
        update_s=update,
        sync_s=m["timing_s/update_weights"],
        step_s=m["timing_s/step"],
    )


def _openrlhf(m: dict[str, float], line: int) -> LoggedStep:
    response = m["rollout/response_length_mean"]
    return LoggedStep(
        line=line,
        rollouts=max(1, round(m["rollout/num_samples"])),
        prompt_mean=0.0,
        response_mean=response,
        response_max=response,
        gen_s=m["timing/generation"],
        score_s=m["timing/make_experience"],
        update_s=m["timing/ppo_train"],
        sync_s=m["timing/broadcast"],
        step_s=m["timing/step_total"],
    )


FORMATS: dict[str, LogFormat] = {
    "verl": LogFormat(
        name="verl",
        source="verl/trainer/ppo/metric_utils.py + ray_trainer.py",
        marker="timing_s/gen",
        required=(
            "timing_s/gen",
            "timing_s/update_actor",
            "timing_s/update_weights",
            "timing_s/step",
            "response_length/mean",
            "prompt_length/mean",
            "perf/total_num_tokens",
        ),
        parse=_verl,
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
    ),
}


def accepted_formats() -> str:
    """One line per format: its name and the keys it needs (for error messages and the README)."""
    return "; ".join(f"{f.name} (keys {', '.join(f.required)})" for f in FORMATS.values())


def read_framework_log(path: str | Path) -> tuple[LogFormat, list[LoggedStep]]:
    """The format of the JSONL log at ``path`` and its steps; one RlsimError listing every problem."""
    p = Path(path)
    records = _records(p)
    fmt = _detect(records, p)
    steps, problems = [], []
    for line, metrics in records:
        if fmt.marker not in metrics:
            continue
        missing = [k for k in fmt.required if k not in metrics]
        if missing:
            problems.append(f"line {line}: missing {', '.join(missing)}")
            continue
        try:
            steps.append(fmt.parse(metrics, line))
        except RlsimError as err:
            problems.append(str(err))
    if problems:
        shown = "\n".join(f"  - {x}" for x in problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise RlsimError(
            f"{p}: {len(problems)} {fmt.name} step line(s) cannot be used:\n{shown}{more}\n"
            f"a {fmt.name} log needs on every step line: {', '.join(fmt.required)}"
        )
    return fmt, steps


def _records(path: Path) -> list[tuple[int, dict[str, float]]]:
    text = read_user_text(path, "framework log")
    out, bad = [], []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as err:
            bad.append(f"line {number}: not JSON ({err.msg})")
            continue
        if isinstance(obj, dict) and isinstance(obj.get("data"), dict):
            obj = obj["data"]  # file loggers' {"step": N, "data": {...}}
        if not isinstance(obj, dict):
            bad.append(f"line {number}: not a JSON object")
            continue
        out.append((number, _numbers(obj)))
    if bad:
        raise RlsimError(
            f"{path} is not a JSONL metrics log ({'; '.join(bad[:5])}); give one JSON object of "
            f"metrics per line. Accepted formats: {accepted_formats()}"
        )
    return out


def _numbers(obj: dict[str, Any]) -> dict[str, float]:
    """The numeric metrics of one record (strings, lists and booleans such as sample texts dropped)."""
    return {k: float(v) for k, v in obj.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _detect(records: list[tuple[int, dict[str, float]]], path: Path) -> LogFormat:
    found = [f for f in FORMATS.values() if any(f.marker in m for _, m in records)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise RlsimError(
            f"{path}: unknown log format (no line has {' or '.join(f.marker for f in FORMATS.values())}). "
            f"Accepted formats: {accepted_formats()}"
        )
    raise RlsimError(f"{path} mixes formats ({', '.join(f.name for f in found)}); give one framework's log per file")
