"""Timelines as Chrome/Perfetto traces (Trace Event Format): open ``trace.json`` in ui.perfetto.dev or
chrome://tracing.

Each actor is a process track (``pid``, named by an ``M`` ``process_name`` event); an actor's events
that overlap in time (micro-batches in flight at once) go on separate thread lanes (``tid``) so every
lane nests properly. Work spans are ``X`` (complete) events with ``ts`` and ``dur`` in microseconds.
``validate_trace`` checks the format; the tests and the writers use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

US = 1_000_000  # microseconds per second
STEPS_TRACK = "steps"


def _lanes(spans: Sequence[tuple[float, float]]) -> list[int]:
    """A lane per span such that spans on one lane never overlap (greedy, in start order)."""
    ends: list[float] = []
    lanes = [0] * len(spans)
    for i in sorted(range(len(spans)), key=lambda i: spans[i]):
        start, end = spans[i]
        free = next((k for k, e in enumerate(ends) if e <= start), None)
        if free is None:
            ends.append(end)
            free = len(ends) - 1
        ends[free] = end
        lanes[i] = free
    return lanes


def trace_events(
    spans: Iterable[Mapping[str, Any]], labels: Mapping[str, str] | None = None, first_pid: int = 1
) -> list[dict[str, Any]]:
    """Trace events for spans ``{"track", "name", "start", "end", "args"?}`` (seconds since an origin).

    ``track`` names the process (an actor, a client); ``labels`` may give it a longer display name.
    """
    spans = list(spans)
    tracks = sorted({s["track"] for s in spans})
    pids = {t: first_pid + i for i, t in enumerate(tracks)}
    out: list[dict[str, Any]] = []
    for track in tracks:
        mine = [s for s in spans if s["track"] == track]
        lanes = _lanes([(float(s["start"]), float(s["end"])) for s in mine])
        pid = pids[track]
        name = (labels or {}).get(track, track)
        out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        for lane in sorted(set(lanes)):
            lane_name = track if lane == 0 else f"{track} (overlapping #{lane})"
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": lane, "args": {"name": lane_name}})
        for span, lane in zip(mine, lanes, strict=True):
            start = float(span["start"])
            out.append(
                {
                    "ph": "X",
                    "name": str(span["name"]),
                    "cat": str(span.get("cat", span["name"])),
                    "pid": pid,
                    "tid": lane,
                    "ts": round(start * US, 3),
                    "dur": round(max(0.0, float(span["end"]) - start) * US, 3),
                    "args": dict(span.get("args", {})),
                }
            )
    return out


def run_trace(
    rows: Sequence[Mapping[str, Any]], steps: Sequence[Mapping[str, Any]], labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A run's trace from its ``timeline.json`` rows (times relative to their step's start) and its
    ``results.json`` steps. Steps are laid end to end (step k starts where step k-1's ``time_s.total``
    ended; the driver's few milliseconds between steps are not recorded) with a ``steps`` track on top."""
    offsets, t = {}, 0.0
    for record in steps:
        offsets[int(record["step"])] = t
        t += float(record["time_s"]["total"])
    spans = [
        {
            "track": STEPS_TRACK,
            "name": f"step {s}",
            "cat": "step",
            "start": offsets[s],
            "end": offsets[s] + float(r["time_s"]["total"]),
            "args": {"step": s},
        }
        for s, r in ((int(r["step"]), r) for r in steps)
    ]
    for row in rows:
        base = offsets.get(int(row["step"]))
        if base is None:  # a row of a step that did not complete
            continue
        args = {k: row[k] for k in ("step", "batch", "items", "cores", "gpu") if k in row}
        spans.append(
            {
                "track": row["actor"],
                "name": row["phase"],
                "start": base + float(row["start"]),
                "end": base + float(row["end"]),
                "args": args,
            }
        )
    # The steps track first (pid 0), then one process per actor.
    events = trace_events([s for s in spans if s["track"] == STEPS_TRACK], first_pid=0)
    events += trace_events([s for s in spans if s["track"] != STEPS_TRACK], labels, first_pid=1)
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def experiment_trace(spans: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The contention experiment's trace: every measured event (wall-clock ``start``/``end``), one track per
    actor process, timed from the first event. Sessions follow each other in time, so the repeats read left
    to right; each span's args name its runtime, repeat, condition and step."""
    origin = min(float(s["start"]) for s in spans)
    shifted = [dict(s, start=float(s["start"]) - origin, end=float(s["end"]) - origin) for s in spans]
    return {"traceEvents": trace_events(shifted), "displayTimeUnit": "ms"}


def validate_trace(doc: Mapping[str, Any]) -> list[str]:
    """Problems with ``doc`` as a Trace Event Format JSON object (empty list: valid)."""
    problems: list[str] = []
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        return ["traceEvents is missing or not a list"]
    named = {(e.get("pid"), "process") for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    named |= {(e.get("pid"), e.get("tid")) for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    for i, e in enumerate(events):
        where = f"event {i}"
        if e.get("ph") not in ("X", "M"):
            problems.append(f"{where}: ph {e.get('ph')!r} is not X or M")
            continue
        for key, kind in (("name", str), ("pid", int), ("tid", int)):
            if not isinstance(e.get(key), kind) or isinstance(e.get(key), bool):
                problems.append(f"{where}: {key} missing or not {kind.__name__}")
        if e["ph"] == "M":
            if not isinstance(e.get("args", {}).get("name", e.get("args", {}).get("sort_index")), (str, int)):
                problems.append(f"{where}: metadata without args.name")
            continue
        for key in ("ts", "dur"):
            if not isinstance(e.get(key), (int, float)) or e[key] < 0:
                problems.append(f"{where}: {key} missing or negative")
        if (e.get("pid"), "process") not in named or (e.get("pid"), e.get("tid")) not in named:
            problems.append(f"{where}: pid {e.get('pid')} / tid {e.get('tid')} has no process_name / thread_name")
    return problems
