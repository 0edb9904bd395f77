"""Which weight sync a step does: a real reload into the engine, or a configured simulated cost.

``auto`` tries the reload and, if the engine refuses (an engine version without in-place reload, a
backend that cannot), falls back to the simulated cost for the rest of the run and records why. A
reload that runs past its deadline (``PhaseTimeout``) fails the step instead: that is a stall.
"""

from __future__ import annotations

from rlsim.errors import RlsimError
from rlsim.loop.deadline import PhaseTimeout


class WeightSync:
    """``mode``: ``auto``, ``reload`` or ``simulated``; ``simulated_s``: seconds the simulated sync blocks."""

    def __init__(self, mode: str, simulated_s: float) -> None:
        if mode not in ("auto", "reload", "simulated"):
            raise ValueError(f"unknown sync mode {mode!r}; valid: auto, reload, simulated")
        self.mode = mode
        self.simulated_s = simulated_s
        self.fallback_reason: str | None = None

    def simulate_reason(self) -> str | None:
        """Why the next sync is the simulated cost (recorded with it), or None: reload the weights."""
        return "trainer.sync: simulated" if self.mode == "simulated" else self.fallback_reason

    def reload_failed(self, err: Exception) -> str:
        """A reload raised ``err``: under ``auto`` the reason to simulate this sync and the rest of the run;
        otherwise ``err`` itself (a stall, ``PhaseTimeout``) or an ``RlsimError`` naming the settings."""
        if isinstance(err, PhaseTimeout):  # a stalled reload is no sign the engine cannot reload: fail
            raise err
        if self.mode != "auto":
            raise RlsimError(
                f"weight reload into the generator failed: {err}; set trainer.sync: auto (fall back to a "
                "simulated cost) or simulated"
            ) from err
        self.fallback_reason = f"reload failed ({type(err).__name__}: {str(err)[:200]}); simulated instead"
        return self.fallback_reason
