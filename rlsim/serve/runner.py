"""Run the scoring server with uvicorn: bind, announce the port, watch the parent, shut down gracefully.

The socket is bound here (not by uvicorn) so ``port=0`` can pick a free port and the real one is
known before serving starts: it is written to ``port_file`` for a parent process to read, which
avoids the race of "find a free port, close it, hope nobody takes it".
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

from rlsim.errors import RlsimError
from rlsim.io import atomic_write_text
from rlsim.models import resolve_reward_model
from rlsim.scoring import make_scorer
from rlsim.serve.app import BackendFactory, create_app
from rlsim.serve.backend import ScoringBackend
from rlsim.serve.metrics import ServerMetrics
from rlsim.serve.settings import ServeSettings, is_loopback

log = logging.getLogger(__name__)

PARENT_POLL_S = 0.5


def registry_backend_factory(settings: ServeSettings) -> BackendFactory:
    """Build the runtime named in ``settings`` from the scorer registry (the normal case)."""

    def build(metrics: ServerMetrics) -> ScoringBackend:

        scorer = make_scorer(settings.runtime, resolve_reward_model(settings.model), settings.scorer)
        return ScoringBackend.from_settings(scorer, settings, metrics.observe_batch)

    return build


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on ``host:port`` (``port=0``: any free port)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as err:
        raise RlsimError(
            f"cannot listen on {host}:{port} ({err.strerror or err}); pick another --port (0 = any free port)"
        ) from None
    return sock


def make_server(
    settings: ServeSettings, factory: BackendFactory | None = None, sock: socket.socket | None = None
) -> tuple[Any, socket.socket]:
    """A configured ``uvicorn.Server`` and its bound socket; ``server.run(sockets=[sock])`` serves."""
    import uvicorn

    settings.check()
    sock = sock or bind_socket(settings.host, settings.port)
    holder: dict[str, Any] = {}
    app = create_app(settings, factory or registry_backend_factory(settings), lambda: _stop(holder))
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        # After SIGTERM, accepted requests get this long to finish before connections are cut.
        # uvicorn annotates int, but only hands it to asyncio.wait_for, which takes float seconds.
        timeout_graceful_shutdown=settings.shutdown_grace_s,  # type: ignore[arg-type]
    )
    server = uvicorn.Server(config)
    holder["server"] = server
    return server, sock


def _stop(holder: dict[str, Any]) -> None:
    server = holder.get("server")
    if server is not None:
        server.should_exit = True


def run_server(
    settings: ServeSettings,
    factory: BackendFactory | None = None,
    port_file: str | os.PathLike[str] | None = None,
    parent_pid: int | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT (or the parent dies); 0 on a clean stop, 2 if the model failed to load."""
    if not is_loopback(settings.host):
        log.warning(f"listening on {settings.host}, reachable from other machines; the API has no authentication")
    server, sock = make_server(settings, factory)
    port = sock.getsockname()[1]
    log.info(f"listening on http://{settings.host}:{port} ({settings.runtime} on {settings.model}); loading the model")
    if port_file is not None:
        atomic_write_text(Path(port_file), f"{port}\n")
    if parent_pid is not None:
        watcher = threading.Thread(target=_watch_parent, args=(parent_pid, server), name="rlsim-parent", daemon=True)
        watcher.start()
    signals = _note_signals(server)
    server.run(sockets=[sock])
    if signals:
        log.info(f"stopped by {signal.Signals(signals[0]).name}; accepted requests were answered")
    return 2 if server.config.app.state.rlsim.status == "failed" else 0


def _note_signals(server: Any) -> list[int]:
    """Make SIGTERM/SIGINT a clean stop (exit 0) rather than death by signal.

    uvicorn handles both while serving, then re-sends the signal to the handler that was there
    before it; with this one in place that ends as a normal return. Set before ``run`` so a signal
    that arrives during start-up also stops the server.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        return received

    def note(signum: int, frame: object) -> None:
        received.append(signum)
        server.should_exit = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, note)
    return received


def _watch_parent(parent_pid: int, server: Any) -> None:
    """Shut down gracefully when the process that started us is gone, so no server is orphaned.

    While our parent lives, ``os.getppid()`` is its pid; once it dies we are re-parented and it
    changes. That holds even for SIGKILL, which no cleanup handler in the parent can catch.
    """
    direct = os.getppid() == parent_pid
    while not server.should_exit:
        gone = os.getppid() != parent_pid if direct else not _alive(parent_pid)
        if gone:
            log.info(f"parent process {parent_pid} is gone; shutting down")
            server.should_exit = True
            return
        time.sleep(PARENT_POLL_S)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
