"""Per-phase deadlines: a phase that stalls fails the step with an error naming it, instead of hanging.

An engine that deadlocks, a trainer stuck in a collective, or an actor wedged in a system call
would otherwise leave the driver waiting in ``ray.get`` forever. Each phase of a step (generation,
the update, the weight sync), the warm-up and the CPU-time probe around a step get a deadline from
the run config (``faults.*_timeout_s``); past it the step fails with a ``PhaseTimeout`` that says
which phase, what it waited on, and which setting to raise. Completed steps are already on disk.
Plain Python (no Ray): the Ray backend turns its waits into ``Deadline.remaining()`` timeouts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rlsim.errors import RlsimError


class PhaseTimeout(RlsimError):
    """A phase ran past its deadline. Not an engine refusing a request: never fall back on it."""


@dataclass
class Deadline:
    """``seconds`` from creation for ``phase`` (its name in messages, e.g. "update phase");
    ``setting`` is the config key that sets it."""

    phase: str
    seconds: float
    setting: str
    end: float = field(init=False)

    def __post_init__(self) -> None:
        self.end = time.monotonic() + self.seconds

    def remaining(self) -> float:
        """Seconds left (0 once past the deadline)."""
        return max(0.0, self.end - time.monotonic())

    def expired(self, waiting_on: str) -> PhaseTimeout:
        """The error to raise once the deadline passed while waiting on ``waiting_on`` (e.g. "the trainer actor")."""
        return PhaseTimeout(
            f"the {self.phase} did not finish within {self.seconds:g} s (still waiting on {waiting_on}); "
            f"it has stalled, or needs longer on this machine: look at {waiting_on}'s log, or raise {self.setting}"
        )


@dataclass(frozen=True)
class PhaseTimeouts:
    """Deadlines in seconds per phase. The defaults are generous (about 100x what the default config's
    phases take on 2 CPU cores) so only a real stall meets them; a large model on a slow machine may
    need more. ``generate_s`` covers a step's whole generation (streamed or not), ``probe_s`` the
    per-actor CPU-time reading before and after each step (actors are idle then: it is quick)."""

    generate_s: float = 1800.0
    update_s: float = 1800.0
    sync_s: float = 900.0
    warmup_s: float = 1800.0
    probe_s: float = 120.0

    def start(self, phase: str) -> Deadline:
        """A deadline for ``phase``: ``generate``, ``update``, ``sync``, ``warmup`` or ``probe``."""
        seconds = {
            "generate": self.generate_s,
            "update": self.update_s,
            "sync": self.sync_s,
            "warmup": self.warmup_s,
            "probe": self.probe_s,
        }[phase]
        name = {"probe": "CPU-time probe", "warmup": "warm-up"}.get(phase, f"{phase} phase")
        return Deadline(name, seconds, f"faults.{phase}_timeout_s")
