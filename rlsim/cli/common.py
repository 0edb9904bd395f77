"""Argument groups shared by subcommands that build scorers."""

from __future__ import annotations

import argparse

from rlsim.scoring.base import ScorerSettings


def add_model_arg(parser: argparse.ArgumentParser, default: str = "minilm-rm") -> None:
    parser.add_argument(
        "--model", default=default, help=f"reward model: minilm-rm, tiny-llama-rm or a local folder (default {default})"
    )


def add_settings_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("runtime settings")
    g.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    g.add_argument("--threads", type=int, default=None, help="torch / ORT intra-op threads (default: all cores)")
    g.add_argument("--no-spinning", action="store_true", help="stop ORT threads spinning between ops")
    g.add_argument("--max-length", type=int, default=None, help="truncate texts to this many tokens")
    g.add_argument("--truncation", choices=["left", "right"], default="left", help="left keeps the response end")
    g.add_argument("--server-runtime", default="ort", help="runtime the http server wraps (default ort)")
    g.add_argument("--url", default=None, help="http runtime: use this running server instead of starting one")
    g.add_argument("--ort-lib", default=None, help="native runtime: path to libonnxruntime.so")
    g.add_argument("--http-deadline-s", type=float, default=60.0,
                   help="http runtime: seconds one batch may take, retries included (default 60)")


def add_import_arg(parser: argparse.ArgumentParser) -> None:
    """``--import MODULE`` (repeatable): a user module that registers plug-in runtimes with ``@register_scorer``."""
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (it may register extra runtimes with @register_scorer); repeatable",
    )


def import_plugins(args: argparse.Namespace) -> None:
    """Import the ``--import`` modules; call it before validating any runtime name."""
    from rlsim.registry import import_modules

    import_modules(args.imports, "--import")


def settings_from_args(args: argparse.Namespace) -> ScorerSettings:
    return ScorerSettings(
        device=args.device,
        threads=args.threads,
        spinning=not args.no_spinning,
        max_length=args.max_length,
        truncation=args.truncation,
        server_runtime=args.server_runtime,
        url=args.url,
        ort_path=args.ort_lib,
        http_deadline_s=args.http_deadline_s,
    )
