"""Pool time by activity, from the operating system's own counters, and the check that it adds up.

Two independent sources are read at the start and end of every measured step:

- *process accounting*: CPU seconds (user + system, plus those of reaped children) of every process
  on the machine, summed per process tree: each activity's actors with their children (vLLM's engine
  processes, the http runtime's server), the rest of the experiment's tree (the driver, Ray's
  daemons, idle scorers of other runtimes: ``orchestration``) and every process outside it
  (``other``: other tenants of the machine);
- the *kernel's per-core counters* (/proc/stat) of the pool's cores: ``idle`` (idle + iowait) and
  ``kernel`` (interrupt handling and time stolen by a hypervisor, which no process is charged for).

The identity ``sum(processes) + idle + kernel == pool cores x step time`` then holds only if the
accounting misses nothing and counts nothing twice; each step reports how far it is off.
Process trees are built from parent pids, so a child that exits and is reaped moves its time into
its parent's ``children_*`` counters, inside the same tree: nothing is lost between snapshots.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

IDENTITY_TOLERANCE = 0.05  # the bound on |accounted - pool x step time| / (pool x step time)
ORCHESTRATION = "orchestration"
OTHER = "other"


@dataclass(frozen=True)
class Snapshot:
    """Cumulative counters at one instant: ``wall`` (time.time() seconds), core-seconds per group,
    ``idle``/``kernel`` core-seconds summed over the pool's cores."""

    wall: float
    groups: dict[str, float]
    idle: float
    kernel: float


@dataclass(frozen=True)
class PoolTime:
    """Core-seconds of the pool between two snapshots, per group, with the identity check.

    ``other`` is ``None`` (and left out of the check) when the pool is not the whole machine:
    processes outside the experiment may then run on cores outside the pool.
    """

    seconds: float
    cores: int
    groups: dict[str, float]
    idle: float
    kernel: float
    checked: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def pool_core_s(self) -> float:
        return self.cores * self.seconds

    @property
    def accounted_core_s(self) -> float:
        return sum(self.groups.values()) + self.idle + self.kernel

    @property
    def residual_fraction(self) -> float:
        """(accounted - pool x time) / (pool x time); 0.03 means 3 % more was accounted than elapsed."""
        return (self.accounted_core_s - self.pool_core_s) / self.pool_core_s if self.pool_core_s > 0 else 0.0

    @property
    def within_tolerance(self) -> bool:
        return abs(self.residual_fraction) <= IDENTITY_TOLERANCE

    def as_dict(self) -> dict[str, object]:
        return {
            "seconds": round(self.seconds, 6), "cores": self.cores,
            "core_s": {k: round(v, 4) for k, v in self.groups.items()} | {"idle": round(self.idle, 4),
                                                                          "kernel": round(self.kernel, 4)},
            "pool_core_s": round(self.pool_core_s, 4), "accounted_core_s": round(self.accounted_core_s, 4),
            "residual_fraction": round(self.residual_fraction, 5), "within_5pct": self.within_tolerance,
            "checked": self.checked, "notes": self.notes,
        }


def group_core_seconds(
    processes: Mapping[int, tuple[int, float]], roots: Mapping[str, Sequence[int]], driver: int
) -> dict[str, float]:
    """Cumulative CPU seconds per group from a process table ``{pid: (ppid, cpu_s)}``.

    Each group owns the trees under its root pids (the first group to claim a pid keeps it); the
    rest of the ``driver``'s tree is ``orchestration``, every other process ``other``.
    """
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in processes.items():
        children.setdefault(ppid, []).append(pid)
    owner: dict[int, str] = {}
    for group, pids in list(roots.items()) + [(ORCHESTRATION, [driver])]:
        stack = [p for p in pids if p in processes]
        while stack:
            pid = stack.pop()
            if pid in owner:
                continue
            owner[pid] = group
            stack += children.get(pid, [])
    out = {group: 0.0 for group in [*roots, ORCHESTRATION, OTHER]}
    for pid, (_, cpu) in processes.items():
        out[owner.get(pid, OTHER)] += cpu
    return out


def pool_time(before: Snapshot, after: Snapshot, cores: int, whole_machine: bool = True) -> PoolTime:
    """Core-seconds per group between two snapshots (a group missing at the start counts from 0)."""
    groups = {g: max(0.0, v - before.groups.get(g, 0.0)) for g, v in after.groups.items()}
    notes = []
    if not whole_machine:
        groups.pop(OTHER, None)
        notes.append("the pool is not the whole machine: other processes' time cannot be placed on it, "
                     "so the identity is not checked")
    return PoolTime(after.wall - before.wall, cores, groups, after.idle - before.idle,
                    after.kernel - before.kernel, checked=whole_machine, notes=notes)


def parse_proc_stat(text: str, cores: Sequence[int], ticks_per_s: float) -> tuple[float, float]:
    """(idle, kernel) seconds summed over ``cores`` from /proc/stat text.

    Per-core line: ``cpuN user nice system idle iowait irq softirq steal guest guest_nice`` in
    ticks; idle = idle + iowait, kernel = irq + softirq + steal (guest time is already in user).
    """
    wanted = {f"cpu{c}" for c in cores}
    idle = kernel = 0.0
    seen = set()
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] in wanted:
            v = [float(x) for x in parts[1:9]] + [0.0] * max(0, 8 - len(parts[1:9]))
            idle += v[3] + v[4]
            kernel += v[5] + v[6] + v[7]
            seen.add(parts[0])
    if seen != wanted:
        raise ValueError(f"/proc/stat has no line for {sorted(wanted - seen)}; the pool names cores this machine lacks")
    return idle / ticks_per_s, kernel / ticks_per_s


def online_cores(text: str) -> list[int]:
    """Core ids that /proc/stat lists."""
    return sorted(int(p.split()[0][3:]) for p in text.splitlines() if p.startswith("cpu") and p[3:4].isdigit())


class PoolAccountant:
    """Takes snapshots of one machine for a pool of cores. ``roots``: group -> actor pids (changeable
    per snapshot: the scoring group is the runtime being measured)."""

    def __init__(self, pool: Sequence[int], driver_pid: int | None = None) -> None:
        self.pool = sorted(pool)
        self.driver_pid = driver_pid or os.getpid()
        self._ticks = float(os.sysconf("SC_CLK_TCK"))
        self.whole_machine = set(online_cores(_read_proc_stat())) <= set(self.pool)

    def snapshot(self, roots: Mapping[str, Sequence[int]]) -> Snapshot:
        wall = time.time()
        idle, kernel = parse_proc_stat(_read_proc_stat(), self.pool, self._ticks)
        groups = group_core_seconds(process_table(), roots, self.driver_pid)
        return Snapshot(wall, groups, idle, kernel)

    def between(self, before: Snapshot, after: Snapshot) -> PoolTime:
        return pool_time(before, after, len(self.pool), self.whole_machine)


def process_table() -> dict[int, tuple[int, float]]:
    """``{pid: (ppid, cpu seconds incl. reaped children)}`` for every process we can read."""
    import psutil

    table = {}
    for proc in psutil.process_iter(["ppid", "cpu_times"]):
        info = proc.info
        t = info.get("cpu_times")
        if t is None or info.get("ppid") is None:  # gone meanwhile, or not ours to read
            continue
        table[proc.pid] = (int(info["ppid"]), t.user + t.system + t.children_user + t.children_system)
    return table


def _read_proc_stat() -> str:
    with open("/proc/stat") as f:
        return f.read()
