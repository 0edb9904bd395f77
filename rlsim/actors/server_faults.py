"""Faults injected into the scoring server behind the ``http`` runtime, from inside the scoring worker.

The server is a child process of the scoring actor, so only that actor's process can reach it on
any node of a cluster: the driver sends the fault along with a scoring call (``faults.
kill_http_server_steps`` / ``stall_http_server_steps``) and the worker applies it just before it
scores that batch. ``kill``: SIGKILL, nothing graceful (the reward stage then starts a new server and
sends the batch again). ``stall``: SIGSTOP, the server keeps its connections but answers nothing,
until ``stall_s`` seconds have passed or, with ``stall_s`` None, until the scoring call has returned
(the http client gave up at its deadline). Plain Python, no Ray.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import psutil

from rlsim.errors import RlsimError
from rlsim.scoring.base import Scorer, ServerScorer


@dataclass(frozen=True)
class ServerFault:
    """``kind``: ``kill`` or ``stall``; ``stall_s``: seconds a stall lasts (None: until the call returns)."""

    kind: Literal["kill", "stall"]
    stall_s: float | None = None


@contextmanager
def server_fault(scorer: Any, fault: ServerFault | None) -> Iterator[None]:
    """Apply ``fault`` to ``scorer``'s server for the duration of the block (None: do nothing)."""
    if fault is None:
        yield
        return
    pid = scorer.server_pid if isinstance(scorer, ServerScorer) else None
    if pid is None:
        name = scorer.name if isinstance(scorer, Scorer) else type(scorer).__name__
        raise RlsimError(
            f"faults: cannot {fault.kind} the scoring server: runtime {name!r} started "
            "none; http server faults need reward.runtime: http (with a server it starts itself)"
        )
    if fault.kind == "kill":
        os.kill(pid, signal.SIGKILL)
        _wait_exited(pid)  # so the batch meets a dead server, not one still closing its sockets
        yield
        return
    os.kill(pid, signal.SIGSTOP)
    resume = threading.Timer(fault.stall_s, _resume, (pid,)) if fault.stall_s is not None else None
    if resume is not None:
        resume.daemon = True
        resume.start()
    try:
        yield
    finally:
        if resume is not None:
            resume.cancel()
        _resume(pid)  # never leave a frozen server behind: it could not even shut down


def _resume(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def _wait_exited(pid: int, timeout_s: float = 30.0) -> None:
    """Until ``pid`` is gone or a zombie (its parent, the http scorer, reaps it when it next looks)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.01)
    raise RlsimError(f"faults: the scoring server (pid {pid}) did not exit within {timeout_s:g} s of SIGKILL")
