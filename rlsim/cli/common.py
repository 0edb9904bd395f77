"""What the subcommands share: the one-line-error parser, range-checked number types, scorer flag groups."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import NoReturn

from rlsim.registry import import_modules
from rlsim.scoring.base import ScorerSettings
from rlsim.scoring.int8_options import CALIBRATION_METHODS, DEFAULT_CALIBRATION


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line (what is wrong, then where help is), exit status 2.

    argparse's own error prints the usage block first; a script reading stderr then gets several lines
    of which only the last says what went wrong.
    """

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}; see `{self.prog} --help`", file=sys.stderr)
        sys.exit(2)


def _number(
    kind: type, what: str, low: float | None = None, high: float | None = None, above: float | None = None
) -> Callable[[str], int | float]:
    """An argparse type: ``kind`` within ``low <= x <= high`` (and ``x > above``), finite; ``what`` says so."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number; give {what}")
        if (
            (low is not None and value < low)
            or (high is not None and value > high)
            or (above is not None and value <= above)
        ):
            raise argparse.ArgumentTypeError(f"{text} is out of range; give {what}")
        return value

    parse.__name__ = what  # argparse names the type by this in its messages
    return parse


positive_int = _number(int, "a whole number >= 1", low=1)
non_negative_int = _number(int, "a whole number >= 0", low=0)
at_least_two = _number(int, "a whole number >= 2", low=2)
port_number = _number(int, "a TCP port 0..65535 (0 picks a free one)", low=0, high=65535)
positive_float = _number(float, "a number > 0", above=0.0)
non_negative_float = _number(float, "a number >= 0", low=0.0)
fraction = _number(float, "a number from 0 to 1", low=0.0, high=1.0)
smoothing_alpha = _number(float, "a number in (0, 1], SmoothQuant's alpha (e.g. 0.5)", above=0.0, high=1.0)
correlation = _number(float, "a number from -1 to 1", low=-1.0, high=1.0)


def int_list(text: str) -> list[int]:
    """``"8,32,64"`` -> ``[8, 32, 64]``; every entry a whole number >= 1."""
    return [int(positive_int(x.strip())) for x in text.split(",") if x.strip()] or _empty(text)


def _empty(text: str) -> NoReturn:
    raise argparse.ArgumentTypeError(f"{text!r} holds no numbers; give a comma-separated list such as 8,32")


def add_model_arg(parser: argparse.ArgumentParser, default: str = "minilm-rm") -> None:
    parser.add_argument(
        "--model", default=default, help=f"reward model: minilm-rm, tiny-llama-rm or a local folder (default {default})"
    )


def add_settings_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("runtime settings")
    g.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    g.add_argument(
        "--threads", type=positive_int, default=None, help="torch / ORT intra-op threads (default: all cores)"
    )
    g.add_argument("--no-spinning", action="store_true", help="stop ORT threads spinning between ops")
    g.add_argument("--max-length", type=positive_int, default=None, help="truncate texts to this many tokens")
    g.add_argument("--truncation", choices=["left", "right"], default="left", help="left keeps the response end")
    g.add_argument("--server-runtime", default="ort", help="runtime the http server wraps (default ort)")
    g.add_argument("--url", default=None, help="http runtime: use this running server instead of starting one")
    g.add_argument(
        "--http-protocol",
        choices=["rlsim", "openrlhf", "vllm-classify"],
        default="rlsim",
        help="http runtime: what the server speaks: rlsim (/score), openrlhf (/get_reward) or "
        "vllm-classify (vLLM's /classify); default rlsim",
    )
    g.add_argument("--ort-lib", default=None, help="native runtime: path to libonnxruntime.so")
    g.add_argument(
        "--http-deadline-s",
        type=positive_float,
        default=60.0,
        help="http runtime: seconds one batch may take, retries included (default 60)",
    )
    g.add_argument(
        "--int8-calibration",
        choices=list(CALIBRATION_METHODS),
        default=DEFAULT_CALIBRATION,
        help="*-int8-static: how activation ranges are set from the calibration split (default minmax)",
    )
    g.add_argument(
        "--int8-smooth-alpha",
        type=smoothing_alpha,
        default=None,
        help="*-int8-static / *-int8-mixed: smooth the graph first (SmoothQuant) with this alpha in (0, 1], "
        "e.g. 0.5 (default: no smoothing)",
    )


def add_reward_config_arg(parser: argparse.ArgumentParser) -> None:
    """``--reward-config FILE``: the settings of rewards that are no model (``function``, ``sandbox``, ``genrm``)
    and of ``http``'s calls, as sections by runtime, or a run config whose ``reward:`` holds them."""
    parser.add_argument(
        "--reward-config",
        default=None,
        metavar="FILE",
        help="YAML with reward sections by runtime (genrm: {...}, sandbox: {...}), or a run config "
        "(its reward: section); default: each runtime's defaults",
    )


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
        http_protocol=args.http_protocol,
        int8_calibration=args.int8_calibration,
        int8_smooth_alpha=args.int8_smooth_alpha,
    )
