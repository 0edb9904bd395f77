"""The ``rlsim`` entry point: one subcommand per module ``rlsim/cli/<name>_cmd.py``.

Each module exposes ``add_arguments(parser)`` and ``run(args) -> int``; only the module of the command being run
(or whose ``--help`` is asked for) is imported, because together the nine cost about 0.25 s at import (their
configs' pydantic models, mostly), which ``rlsim --help`` and every single command would otherwise pay. User errors
(``RlsimError``) print one message and exit 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from rlsim import logs, signals
from rlsim.cli.common import Parser
from rlsim.errors import RlsimError

VERBOSE_HELP = "also show rlsim's debug lines and transformers' and Ray's own loading and start-up logs"
# Name -> the line ``rlsim --help`` shows for it, in that order.
SUBCOMMANDS = {
    "verify": "compare every scoring runtime with the PyTorch eager reference",
    "score": "score a .txt / .jsonl file of texts into a JSONL of rewards",
    "export": "export a reward model to ONNX (plain, ORT-fused, int8)",
    "serve": "serve a reward model over HTTP with dynamic batching (loopback by default)",
    "bench": "benchmarks with repeats in fresh processes and confidence intervals",
    "run": "run simulated RLHF steps on Ray: vLLM rollouts, scoring, a GRPO update, weight sync",
    "experiment": "experiments on the RLHF loop (contention and freed capacity)",
    "profile": "measure scorer latency, generation, update and contention into a planner profile (JSON)",
    "plan": "simulate RLHF steps on a cluster from a measured profile and search placements",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every subcommand's arguments, or, given ``command``, with only that one's: the others are
    listed by name and help line, and their modules are not imported."""
    parser = Parser(  # one-line usage errors, exit 2, in every subcommand too
        prog="rlsim",
        description="Simulated RLHF steps on Ray + vLLM: reward-model runtimes, contention, freed capacity, planning.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, line in SUBCOMMANDS.items():
        subparser = sub.add_parser(name, help=line)
        if command in (None, name):
            # Every listed module ships with rlsim: a missing one is a broken install and must raise, not
            # silently drop a subcommand's arguments.
            importlib.import_module(f"rlsim.cli.{name}_cmd").add_arguments(subparser)
    for subparser in sub.choices.values():  # `rlsim run -v` as well as `rlsim -v run`
        subparser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
    return parser


def _command(argv: list[str]) -> str:
    """The subcommand ``argv`` names: its first word that is not an option (rlsim's own options take no value)."""
    return next((word for word in argv if not word.startswith("-")), "")


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser(_command(sys.argv[1:] if argv is None else argv)).parse_args(argv)
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
