"""The ``rlsim`` entry point: one subcommand per module ``rlsim/cli/<name>_cmd.py``.

Each module exposes ``add_parser(subparsers)`` (cheap: no heavy imports at module level) and
``run(args) -> int``. User errors (``RlsimError``) print one message and exit 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from rlsim import logs, signals
from rlsim.cli.common import Parser
from rlsim.errors import RlsimError

VERBOSE_HELP = "also show rlsim's debug lines and transformers' and Ray's own loading and start-up logs"
SUBCOMMANDS = ["verify", "score", "export", "serve", "bench", "run", "experiment", "profile", "plan"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(  # one-line usage errors, exit 2, in every subcommand too
        prog="rlsim",
        description="Simulated RLHF steps on Ray + vLLM: reward-model runtimes, contention, freed capacity, planning.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        # Every listed module ships with rlsim: a missing one is a broken install and must raise, not
        # silently drop a subcommand from --help.
        importlib.import_module(f"rlsim.cli.{name}_cmd").add_parser(sub)
    for subparser in sub.choices.values():  # `rlsim run -v` as well as `rlsim -v run`
        subparser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # a usage error (one line, status 2) or --help: the caller gets the status
        return int(stop.code or 0)
    logs.configure(args.verbose)
    try:
        return int(args.func(args) or 0)
    except RlsimError as err:
        print(f"rlsim {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rlsim {args.command}: interrupted; completed results are on disk", file=sys.stderr)
        return 130
    except SystemExit as stop:  # SIGTERM, once Ray is up (rlsim/signals.py): actors and Ray are stopped by now
        if stop.code == 143 or signals.terminated():  # Ray turns it into SystemExit(1) inside ray.get/wait
            print(f"rlsim {args.command}: terminated (SIGTERM); completed results are on disk", file=sys.stderr)
            return 143
        raise


if __name__ == "__main__":
    sys.exit(main())
