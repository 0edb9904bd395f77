"""How busy the machine is with other work, from the kernel's counters (``/proc/stat``, Linux).

A loop run measured while other programs use the same cores runs slower than the profile predicts
for reasons the planner does not model. ``wait_until_quiet`` holds a run back until the cores are
mostly idle (bounded in time), and ``foreign_share`` says afterwards how much of the cores' time
during a run went to processes other than the run's own actors.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_STAT = "/proc/stat"


@dataclass(frozen=True)
class CpuSample:
    """Cumulative busy and total CPU seconds of all cores at ``wall_s`` (monotonic seconds)."""

    wall_s: float
    busy_s: float
    total_s: float


def sample() -> CpuSample | None:
    """The kernel's cumulative counters now; None where ``/proc/stat`` cannot be read."""
    try:
        with open(_STAT) as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    # guest time is already counted in user/nice, so only the first 8 fields make up the total.
    total = sum(ticks[:8])
    return CpuSample(time.monotonic(), (total - idle) / hz, total / hz)


def busy_share(before: CpuSample, after: CpuSample) -> float:
    """Share of all cores' time that was busy between two samples, in [0, 1]."""
    total = after.total_s - before.total_s
    return (after.busy_s - before.busy_s) / total if total > 0 else 0.0


def foreign_share(before: CpuSample | None, after: CpuSample | None, own_cpu_s: float) -> float | None:
    """Share of all cores' time between the samples used by others than ``own_cpu_s`` accounts for."""
    if before is None or after is None or after.total_s <= before.total_s:
        return None
    other = (after.busy_s - before.busy_s) - own_cpu_s
    return max(0.0, other / (after.total_s - before.total_s))


def wait_until_quiet(
    busy_below: float, max_wait_s: float, window_s: float, note: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Wait until one ``window_s`` window has all cores busy less than ``busy_below`` of the time.

    Gives up after ``max_wait_s`` (the run then goes ahead and the record says so). Returns
    ``{"waited_s", "busy_share", "quiet"}``; ``busy_share`` None where the counters are unreadable.
    """
    start = time.monotonic()
    told = False
    while True:
        before = sample()
        time.sleep(window_s)
        after = sample()
        if before is None or after is None:
            return {"waited_s": 0.0, "busy_share": None, "quiet": None}
        share = busy_share(before, after)
        waited = time.monotonic() - start
        if share < busy_below or waited >= max_wait_s:
            return {"waited_s": round(waited, 1), "busy_share": round(share, 3), "quiet": share < busy_below}
        if note and not told:
            note(
                f"the cores are {share:.0%} busy with other work; waiting up to {max_wait_s:.0f} s "
                f"for under {busy_below:.0%}"
            )
            told = True
