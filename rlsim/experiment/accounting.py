"""Pool time by activity, from the operating system's own counters, and the check that it adds up.

Two independent sources are read at the start and end of every measured step:

- *process accounting*: CPU seconds of every process on the machine (its own user + system time,
  and the time of children it reaped), summed per process tree: each activity's actors with their
  children (vLLM's engine processes, the http runtime's server), the rest of the experiment's tree
  (the driver, Ray's daemons, idle scorers of other runtimes: ``orchestration``) and every process
  outside it (``other``: other tenants of the machine);
- the *kernel's per-core counters* (/proc/stat) of the pool's cores: ``idle`` (idle + iowait) and
  ``kernel`` (interrupt handling and time stolen by a hypervisor, which no process is charged for).

The identity ``sum(processes) + idle + kernel == pool cores x step time`` then holds only if the
accounting misses nothing and counts nothing twice; each step reports how far it is off.

Processes that come and go between the two snapshots are the hard part. Per process, the interval's
time is its own time's growth plus the growth of its reaped-children counter *minus* the time its
exited children had already used at the first snapshot (that part is older than the interval but
lands in the counter in one piece when the child is reaped). A process that exits with no parent
left to reap it in view (another tenant's job, say) loses only its last moments, never its whole
history, so one such exit cannot make a step's figures go negative.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import psutil

IDENTITY_TOLERANCE = 0.05  # the bound on |accounted - pool x step time| / (pool x step time)
ORCHESTRATION = "orchestration"
OTHER = "other"


Proc = tuple[int, float, float]  # (ppid, own CPU seconds, reaped children's CPU seconds)


@dataclass(frozen=True)
class Snapshot:
    """Cumulative counters at one instant: ``wall`` (time.time() seconds), the process table
    ``{pid: (ppid, own cpu s, children cpu s)}``, ``idle``/``kernel`` core-seconds of the pool's cores."""

    wall: float
    processes: dict[int, Proc]
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
            "seconds": round(self.seconds, 6),
            "cores": self.cores,
            "core_s": {k: round(v, 4) for k, v in self.groups.items()}
            | {"idle": round(self.idle, 4), "kernel": round(self.kernel, 4)},
            "pool_core_s": round(self.pool_core_s, 4),
            "accounted_core_s": round(self.accounted_core_s, 4),
            "residual_fraction": round(self.residual_fraction, 5),
            "within_5pct": self.within_tolerance,
            "checked": self.checked,
            "notes": self.notes,
        }


def assign_groups(processes: Mapping[int, Proc], roots: Mapping[str, Sequence[int]], driver: int) -> dict[int, str]:
    """pid -> group: each group owns the trees under its root pids (the first group to claim a pid
    keeps it); the rest of the ``driver``'s tree is ``orchestration``, every other process ``other``."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in processes.items():
        children.setdefault(ppid, []).append(pid)
    owner: dict[int, str] = {}
    for group, pids in list(roots.items()) + [(ORCHESTRATION, [driver])]:
        stack = [p for p in pids if p in processes]
        while stack:
            pid = stack.pop()
            if pid not in owner:
                owner[pid] = group
                stack += children.get(pid, [])
    return {pid: owner.get(pid, OTHER) for pid in processes}


def process_deltas(before: Mapping[int, Proc], after: Mapping[int, Proc]) -> dict[int, float]:
    """CPU seconds each process alive at ``after`` used since ``before`` (its reaped children included).

    New process: all its time. Known process: own growth + reaped-children growth - what its
    descendants that exited meanwhile had used by ``before`` (clamped at 0: a child that exited but
    was not reaped yet has not reached the counter). Exited processes themselves get no entry.
    """
    exited_by_parent: dict[int, float] = {}
    for pid, (ppid, own, reaped) in before.items():
        if pid in after:
            continue
        # A chain that exited together (a job's shell and its program) lands in the counter of the
        # nearest ancestor still alive, each process through the one above it.
        while ppid in before and ppid not in after:
            ppid = before[ppid][0]
        exited_by_parent[ppid] = exited_by_parent.get(ppid, 0.0) + own + reaped
    out = {}
    for pid, (_, own, reaped) in after.items():
        prev = before.get(pid)
        if prev is None:
            out[pid] = own + reaped
        else:
            out[pid] = max(0.0, own - prev[1]) + max(0.0, reaped - prev[2] - exited_by_parent.get(pid, 0.0))
    return out


def pool_time(
    before: Snapshot,
    after: Snapshot,
    roots: Mapping[str, Sequence[int]],
    driver: int,
    cores: int,
    whole_machine: bool = True,
) -> PoolTime:
    """Core-seconds per group between two snapshots; groups from the process trees at ``after``."""
    owner = assign_groups(after.processes, roots, driver)
    groups = {g: 0.0 for g in [*roots, ORCHESTRATION, OTHER]}
    for pid, seconds in process_deltas(before.processes, after.processes).items():
        groups[owner[pid]] += seconds
    notes = []
    if not whole_machine:
        groups.pop(OTHER, None)
        notes.append(
            "the pool is not the whole machine: other processes' time cannot be placed on it, "
            "so the identity is not checked"
        )
    return PoolTime(
        after.wall - before.wall,
        cores,
        groups,
        after.idle - before.idle,
        after.kernel - before.kernel,
        checked=whole_machine,
        notes=notes,
    )


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
    """Takes snapshots of this machine for a pool of cores; ``between`` splits the time by groups
    (``roots``: group -> actor pids, e.g. the scorers of the runtime being measured)."""

    def __init__(self, pool: Sequence[int], driver_pid: int | None = None) -> None:
        self.pool = sorted(pool)
        self.driver_pid = driver_pid or os.getpid()
        self._ticks = float(os.sysconf("SC_CLK_TCK"))
        self.whole_machine = set(online_cores(_read_proc_stat())) <= set(self.pool)

    def snapshot(self) -> Snapshot:
        wall = time.time()
        idle, kernel = parse_proc_stat(_read_proc_stat(), self.pool, self._ticks)
        return Snapshot(wall, process_table(), idle, kernel)

    def between(self, before: Snapshot, after: Snapshot, roots: Mapping[str, Sequence[int]]) -> PoolTime:
        return pool_time(before, after, roots, self.driver_pid, len(self.pool), self.whole_machine)


def process_table() -> dict[int, Proc]:
    """``{pid: (ppid, own cpu s, reaped children's cpu s)}`` for every process we can read."""
    table = {}
    for proc in psutil.process_iter(["ppid", "cpu_times"]):
        info = proc.info
        t = info.get("cpu_times")
        if t is None or info.get("ppid") is None:  # gone meanwhile, or not ours to read
            continue
        table[proc.pid] = (int(info["ppid"]), t.user + t.system, t.children_user + t.children_system)
    return table


def _read_proc_stat() -> str:
    with open("/proc/stat") as f:
        return f.read()
