"""SIGTERM that unwinds: ``finally`` blocks still stop the actors and Ray.

Ray's driver installs a handler of its own for SIGTERM that aborts the process at once (exit 134,
"SIGTERM received" in the log), so nothing is closed and Ray's dashboard and runtime-env agents are
left running. Every place that starts Ray calls ``unwind_on_sigterm()`` right after ``ray.init``.

A SIGTERM that lands while the main thread blocks in ``ray.get``/``ray.wait`` reaches the caller as
``SystemExit(1)``: Ray catches the handler's ``SystemExit`` in its own signal check and raises another.
``terminated()`` tells the CLI that the exit was the signal's, so it can still exit 143.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

_received = threading.Event()


def unwind_on_sigterm() -> Any:
    """Make SIGTERM raise ``SystemExit(143)`` in the main thread; returns the handler it replaced
    (None when called outside the main thread, where Python cannot set signal handlers)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum: int, _frame: Any) -> None:
        _received.set()
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, stop)


def terminated() -> bool:
    """Whether a SIGTERM has arrived through ``unwind_on_sigterm``'s handler in this process."""
    return _received.is_set()
