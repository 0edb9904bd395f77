"""Helpers for the server tests: a server in a background thread, or ``rlsim serve`` as a process."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from rlsim.scoring.base import Scorer
from rlsim.serve.backend import ScoringBackend
from rlsim.serve.metrics import ServerMetrics
from rlsim.serve.settings import ServeSettings

WAIT = 60.0  # seconds; only reached when something is broken
# httpx builds a TLS context (loading certifi's bundle) for every Client it makes, ~50 ms of CPU each here; the
# fuzzers make one per request. These servers speak plain HTTP, so every test client shares this one context.
TLS = ssl.create_default_context()
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Running:
    """A server started by ``start_server``; ``state`` is the app's ``ServerState`` (for sync only)."""

    url: str
    server: Any
    thread: threading.Thread
    scorer: Any
    state: Any

    def client(self, **kw: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=WAIT, verify=TLS, **kw)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "server thread did not stop"


def backend_factory(scorer: Scorer, settings: ServeSettings) -> Callable[[ServerMetrics], ScoringBackend]:
    def build(metrics: ServerMetrics) -> ScoringBackend:
        return ScoringBackend.from_settings(scorer, settings, metrics.observe_batch)

    return build


def wait_ready(url: str, deadline_s: float = WAIT) -> None:
    end = time.monotonic() + deadline_s
    with httpx.Client(timeout=5, verify=TLS) as client:
        while time.monotonic() < end:
            try:
                if client.get(f"{url}/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
    raise AssertionError(f"server at {url} never became ready")


def serve_process(*args: str, env: dict[str, str] | None = None, port_file: Path) -> subprocess.Popen[bytes]:
    """``python -m rlsim serve ARGS`` with the test runtimes importable; stderr is piped."""
    full_env = dict(os.environ, **(env or {}))
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), full_env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "rlsim", "serve", "--import", "tests.helpers.tiny_scorer", "--port", "0"]
    cmd += ["--port-file", str(port_file), *args]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=full_env)


def process_url(proc: subprocess.Popen[bytes], port_file: Path) -> str:
    end = time.monotonic() + WAIT
    while not port_file.is_file():
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "server exited"
        assert time.monotonic() < end, "server never wrote its port file"
        time.sleep(0.05)
    return f"http://127.0.0.1:{int(port_file.read_text())}"


def terminate(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server (SIGTERM, then SIGKILL) and close its pipes (pytest turns a leaked pipe into an error)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
