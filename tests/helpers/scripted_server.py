"""A scripted HTTP reward server on loopback for the client tests: a handler answers JSON, the server runs in a
background thread. Real HTTP on 127.0.0.1; only the answers (slow, 503, 429, ...) are scripted."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def send_json(handler: BaseHTTPRequestHandler, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
    """Answer ``body`` as JSON; a client that already stopped waiting (its timeout) is ignored."""
    data = json.dumps(body).encode()
    try:
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(data)
    except OSError:
        pass


class RewardServerHandler(BaseHTTPRequestHandler):
    """rlsim's protocol: ``GET /health`` says ready with ``max_texts``; a subclass answers ``POST /score``."""

    max_texts = 64

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        send_json(self, 200, {"status": "ready", "max_texts": self.max_texts})


def read_json(handler: BaseHTTPRequestHandler) -> dict:
    return json.loads(handler.rfile.read(int(handler.headers["content-length"])))


@contextmanager
def scripted_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a threaded server running ``handler`` until the block ends."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
