"""``rlsim serve``: the reward-scoring HTTP server (FastAPI/uvicorn) around any runtime.

Example: ``rlsim serve --runtime ort --model minilm-rm --port 8000`` then
``curl -s localhost:8000/score -d '{"texts": ["hello"]}' -H 'content-type: application/json'``.
"""

from __future__ import annotations

import argparse

from rlsim.cli.common import (
    add_import_arg,
    add_model_arg,
    add_settings_args,
    import_plugins,
    non_negative_float,
    non_negative_int,
    port_number,
    positive_float,
    positive_int,
    settings_from_args,
)
from rlsim.errors import RlsimError
from rlsim.io import check_output_file
from rlsim.scoring import SCORERS, unavailable_reason
from rlsim.serve.settings import ServeSettings


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runtime", default="ort", help="a registered runtime: eager, ort, native, ... (default ort)")
    add_model_arg(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others expose the server)")
    p.add_argument("--port", type=port_number, default=8000, help="TCP port (default 8000; 0 picks a free one)")
    p.add_argument("--port-file", default=None, help="write the bound port here once listening (for port 0)")
    g = p.add_argument_group("batching and limits")
    g.add_argument("--max-batch-size", type=positive_int, default=32, help="sequences per dynamic batch (default 32)")
    g.add_argument(
        "--sub-batch-size",
        type=non_negative_int,
        default=8,
        help="score a batch's texts sorted by length in passes of at most this many (default 8; 0: one pass)",
    )
    g.add_argument(
        "--max-wait-ms", type=non_negative_float, default=2.0, help="longest wait for a fuller batch, ms (default 2)"
    )
    g.add_argument(
        "--max-queue", type=positive_int, default=512, help="queued sequences before answering 503 (default 512)"
    )
    g.add_argument(
        "--timeout-s", type=positive_float, default=30.0, help="per-request timeout before 504, s (default 30)"
    )
    g.add_argument("--max-texts", type=positive_int, default=256, help="inputs per request (default 256)")
    g.add_argument("--max-text-chars", type=positive_int, default=100_000, help="characters per text (default 100000)")
    g.add_argument(
        "--shutdown-grace-s", type=positive_float, default=30.0, help="time to finish requests on SIGTERM, s"
    )
    g.add_argument("--no-warmup", action="store_true", help="report ready without a warm-up forward pass")
    add_settings_args(p)
    p.add_argument("--parent-pid", type=positive_int, default=None, help=argparse.SUPPRESS)  # set by the http runtime
    add_import_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlsim.serve.runner import run_server

    import_plugins(args)
    SCORERS.get(args.runtime)  # an unknown runtime fails now, listing the valid ones, before binding a port
    reason = unavailable_reason(args.runtime)
    if reason:
        raise RlsimError(reason)
    if args.port_file:
        check_output_file(args.port_file, "--port-file")
    settings = ServeSettings(
        runtime=args.runtime,
        model=args.model,
        host=args.host,
        port=args.port,
        scorer=settings_from_args(args),
        max_batch_size=args.max_batch_size,
        sub_batch_size=args.sub_batch_size,
        max_wait_s=args.max_wait_ms / 1000.0,
        max_queue=args.max_queue,
        request_timeout_s=args.timeout_s,
        max_texts=args.max_texts,
        max_text_chars=args.max_text_chars,
        warmup=not args.no_warmup,
        shutdown_grace_s=args.shutdown_grace_s,
    ).check()
    return run_server(settings, port_file=args.port_file, parent_pid=args.parent_pid)
