"""``rlsim score``: score a file of texts offline and write one JSONL line per input, in order."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

from rlsim.batching import make_batcher, score_texts
from rlsim.batching.base import batcher_names
from rlsim.cli.common import (
    add_model_arg,
    add_reward_config_arg,
    add_settings_args,
    positive_int,
    settings_from_args,
)
from rlsim.errors import RlsimError
from rlsim.io import atomic_write_text, check_output_file
from rlsim.models import resolve_reward_model
from rlsim.rewards.options import OPTIONS, read_reward_sections
from rlsim.scoring import make_scorer
from rlsim.workloads import read_texts


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arg(p)
    p.add_argument("--runtime", default="ort", help="scoring runtime (default ort)")
    p.add_argument(
        "--input", required=True, help=".txt (one text a line; blank lines skipped) or .jsonl with a 'text' field"
    )
    p.add_argument("--output", required=True, help="output .jsonl: one {'text', 'reward'} line per input")
    p.add_argument("--batcher", default="sorted", help=f"{', '.join(batcher_names())} (default sorted)")
    p.add_argument("--batch-size", type=positive_int, default=32)
    p.add_argument("--budget", type=positive_int, default=None, help="token-budget: padded tokens per batch")
    add_settings_args(p)
    add_reward_config_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    # Input and output are checked before the model loads: a bad path costs nothing and changes nothing.
    check_output_file(args.output, "--output")
    texts = read_texts(args.input)
    batcher = make_batcher(args.batcher, size=args.batch_size, budget=args.budget)
    settings = settings_from_args(args)
    if args.reward_config:
        settings = replace(settings, options=runtime_section(args.reward_config, args.runtime))
    scorer = make_scorer(args.runtime, resolve_reward_model(args.model), settings)
    try:
        rewards, report = score_texts(scorer, texts, batcher)
    finally:
        scorer.close()
    lines = (
        json.dumps({"text": t, "reward": float(r)}, ensure_ascii=False) for t, r in zip(texts, rewards, strict=True)
    )
    atomic_write_text(args.output, "".join(line + "\n" for line in lines))
    summary = {
        "output": args.output,
        "texts": len(texts),
        "truncated": scorer.stats.truncated,
        "padding_waste": round(report.padding_waste, 4),
        "seconds": round(report.total_s, 3),
    }
    print(json.dumps(summary), file=sys.stdout)
    return 0


def runtime_section(path: str, runtime: str) -> dict[str, Any]:
    """``runtime``'s section of ``--reward-config``; an error when the file has none for it."""
    if runtime not in OPTIONS:
        raise RlsimError(
            f"--reward-config sets rewards that are no model ({', '.join(OPTIONS)}); {runtime} takes the runtime "
            "settings flags instead (--threads, --max-length, ...): leave --reward-config out"
        )
    sections = read_reward_sections(path)
    if runtime not in sections:
        have = ", ".join(sections) or "none"
        raise RlsimError(
            f"--reward-config {path} has no {runtime} section (it has: {have}); add `{runtime}:` with its settings "
            "or leave --reward-config out to run it with the defaults"
        )
    return sections[runtime]
