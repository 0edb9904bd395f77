"""``rlsim export``: ONNX export (plain, fused, int8) of a reward model into the cache or a folder."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rlsim.cli.common import add_model_arg
from rlsim.io import check_output_dir
from rlsim.models import resolve_reward_model
from rlsim.scoring.export import export_reward_model


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arg(p)
    p.add_argument("--out", default=None, help="folder for the graphs (default: the rlsim cache)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if args.out:
        check_output_dir(args.out, "--out")
    spec = resolve_reward_model(args.model)
    ex = export_reward_model(spec, Path(args.out) if args.out else None)
    print(
        json.dumps(
            {
                "plain": str(ex.plain),
                "optimized": str(ex.optimized),
                "int8": str(ex.int8),
                "fusions": ex.fusions,
                "export_s": round(ex.export_s, 2),
            }
        )
    )
    return 0
