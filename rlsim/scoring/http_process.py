"""What the ``http`` runtime needs around its requests: the ``rlsim serve`` child processes it starts (the
command line, where the child imports rlsim from, stopping it, and the ``atexit`` hook that stops any
left), and reading an error answer (its detail and ``Retry-After``).
"""

from __future__ import annotations

import atexit
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from rlsim.errors import RlsimError
from rlsim.scoring.base import SCORERS, ScorerSettings

LIVE: set[subprocess.Popen[bytes]] = set()  # servers this process started and has not stopped yet


@atexit.register
def _stop_all() -> None:
    for proc in list(LIVE):
        stop_server(proc, timeout_s=5.0)


def in_process_runtimes() -> list[str]:
    """Built-in reward-model runtimes a server can wrap: every core one that is not itself server-backed, and
    those named only explicitly (``vllm``: ``rlsim serve`` in front of a pooling engine)."""
    return [
        e.name
        for e in SCORERS.entries()
        if e.builtin and e.info.kind == "model" and not e.info.variant and not e.info.server
    ]


def stop_server(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM (the server finishes accepted requests), then SIGKILL if it does not exit in time."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    LIVE.discard(proc)


def settings_flags(s: ScorerSettings) -> list[str]:
    flags = ["--device", s.device, "--truncation", s.truncation]
    if s.threads:
        flags += ["--threads", str(s.threads)]
    if not s.spinning:
        flags.append("--no-spinning")
    if s.max_length:
        flags += ["--max-length", str(s.max_length)]
    if s.ort_path:
        flags += ["--ort-lib", s.ort_path]
    return flags


def package_root() -> str:
    """The folder holding this ``rlsim`` package, so the child runs the very same code."""
    return str(Path(__file__).resolve().parents[2])


def module_root(module: str, runtime: str) -> str:
    mod = sys.modules.get(module)
    path = getattr(mod, "__file__", None)
    if module == "__main__" or path is None:
        raise RlsimError(
            f"runtime {runtime!r} is defined in {module}, which a server process cannot import; "
            "move it into an importable module"
        )
    return str(Path(path).resolve().parents[module.count(".")])


def response_detail(response: Any) -> str:
    try:
        return str(response.json().get("detail", response.text))[:2000]
    except ValueError:
        return response.text[:2000] or "(empty body)"


def retry_after_s(response: Any) -> float:
    try:
        return max(0.0, float(response.headers.get("retry-after", 0)))
    except ValueError:
        return 0.0
