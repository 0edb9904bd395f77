"""Reward-model precision on a CUDA GPU: throughput and fidelity of fp32, bf16 and fp16, eager and compiled.

For a GPU machine that has torch and transformers but not rlsim's whole set-up (no vLLM, no fetching): it takes
a Hugging Face sequence-classification folder and the fidelity corpus, both written here first.

  # on the development machine: the corpus (stdlib docstrings, a fixed Python) and the model, in one folder
  python benchmarks/gpu_precision.py --prepare .gpu --model-name minilm-rm
  # on the GPU machine
  python benchmarks/gpu_precision.py --model .gpu/model --corpus .gpu/corpus.json --out result.json

Per (mode, dtype): sequences/s at 32 x 128 tokens (5 repeats of 20 timed batches after warm-up, CUDA events),
as a fraction of that dtype's measured GEMM peak, and the fidelity of its rewards on the corpus against fp32
eager (Spearman, Kendall tau, within-group pair flips, GRPO advantage sign flips and MAE, reward MAE / std:
rlsim.corpus.agreement). The model travels as fp16 weights to fit the device tool's 64 MiB; every dtype then
computes from the same (fp16-rounded) weights, so what is compared is the arithmetic, not the weights. The JSON
is rewritten after every cell, so a run cut short still leaves what it measured.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DTYPES = ("fp32", "bf16", "fp16")
BATCH, SEQ, TIMED, REPEATS = 32, 128, 20, 5


def prepare(out: Path, model_name: str) -> None:
    """Write ``out/corpus.json`` and ``out/model`` (fp16 safetensors + tokenizer) for the GPU run."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rlsim.corpus.fidelity_corpus import build_corpus
    from rlsim.models import resolve_reward_model

    corpus = build_corpus()
    out.mkdir(parents=True, exist_ok=True)
    (out / "corpus.json").write_text(
        json.dumps(
            {
                "texts": list(corpus.texts),
                "groups": corpus.groups.tolist(),
                "digest": corpus.digest,
                "python": platform.python_version(),
            }
        )
    )
    spec = resolve_reward_model(model_name)
    model = AutoModelForSequenceClassification.from_pretrained(str(spec.path)).to(torch.float16)
    model.save_pretrained(out / "model")
    AutoTokenizer.from_pretrained(str(spec.path)).save_pretrained(out / "model")
    print(f"wrote {out}/corpus.json ({len(corpus.texts)} texts, digest {corpus.digest}) and {out}/model")


def gemm_tflops(torch: Any, dtype: Any, device: str) -> float:
    n = 8192 if device == "cuda" else 1024
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync(torch, device)
    t0 = time.perf_counter()
    for _ in range(10):
        a @ b
    sync(torch, device)
    return 2 * n**3 * 10 / (time.perf_counter() - t0) / 1e12


def t_interval(xs: list[float]) -> list[float]:
    t95 = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45}
    mean = statistics.fmean(xs)
    half = t95.get(len(xs), 2.0) * statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else float("nan")
    return [mean - half, mean + half]


def sync(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def throughput(torch: Any, forward: Any, vocab: int, device: str, timed: int) -> dict[str, Any]:
    ids = torch.randint(1000, vocab, (BATCH, SEQ), device=device)
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        for _ in range(5):
            forward(ids, mask)
        sync(torch, device)
        rates = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            for _ in range(timed):
                forward(ids, mask)
            sync(torch, device)
            rates.append(BATCH * timed / (time.perf_counter() - t0))
    return {"seq_per_s": statistics.fmean(rates), "ci95": t_interval(rates), "repeats": rates}


def corpus_rewards(torch: Any, forward: Any, tok: Any, texts: list[str], compiled: bool, device: str) -> list[float]:
    """Rewards for every text, in order; a compiled model sees fixed shapes (batch 32, length a multiple of 128)."""
    out: list[float] = []
    with torch.inference_mode():
        for i in range(0, len(texts), BATCH):
            chunk = texts[i : i + BATCH]
            enc = tok(chunk, padding=True, truncation=True, max_length=512, return_tensors="pt")
            ids, mask = enc["input_ids"], enc["attention_mask"]
            if compiled:
                length = min(512, 128 * math.ceil(ids.shape[1] / 128))
                pad = torch.zeros((BATCH, length), dtype=ids.dtype)
                full_mask = torch.zeros((BATCH, length), dtype=mask.dtype)
                pad[: len(chunk), : ids.shape[1]], full_mask[: len(chunk), : ids.shape[1]] = ids, mask
                pad[len(chunk) :, 0], full_mask[len(chunk) :, 0] = ids[0, 0], 1
                ids, mask = pad, full_mask
            logits = forward(ids.to(device), mask.to(device)).float().cpu()
            out += logits[: len(chunk), 0].tolist()
    return out


def write(path: Path, result: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2))
    os.replace(tmp, path)


def measure(
    model_dir: Path,
    corpus_path: Path,
    out: Path,
    modes: list[str],
    device: str,
    limit: int | None,
    gflop_per_seq: float,
) -> None:
    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rlsim.corpus.agreement import fidelity_metrics
    from rlsim.fingerprint import machine_fingerprint

    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_precision.py: torch sees no CUDA device (--device cpu only checks the script)")
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32
    corpus = json.loads(corpus_path.read_text())
    texts, groups = corpus["texts"][:limit], np.asarray(corpus["groups"][:limit])
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    result: dict[str, Any] = {
        "benchmark": "gpu_precision",
        "command": "python " + " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": machine_fingerprint(),
        "versions": {"torch": torch.__version__},
        "corpus": {"texts": len(texts), "digest": corpus["digest"]},
        "shape": [BATCH, SEQ],
        "gflop_per_seq": gflop_per_seq,
        "weights": "fp16-rounded, computed in each dtype",
        "gemm_tflops": {},
        "cells": {},
    }
    names = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    for name in DTYPES:
        result["gemm_tflops"][name] = gemm_tflops(torch, names[name], device)
    write(out, result)
    reference = None
    for mode in modes:
        for name in DTYPES:
            cell = f"{mode}-{name}"
            t0 = time.perf_counter()
            model = AutoModelForSequenceClassification.from_pretrained(str(model_dir), attn_implementation="eager")
            model = model.to(device, names[name]).eval()

            def plain(ids: Any, mask: Any, m: Any = model) -> Any:
                return m(input_ids=ids, attention_mask=mask).logits

            if mode == "compile":
                # A fresh dynamo per cell: the earlier cells' graphs (other dtypes, 4 shapes each) would
                # otherwise use up its recompile limit and leave this cell running partly eager.
                torch._dynamo.reset()
            forward = torch.compile(plain, dynamic=False) if mode == "compile" else plain
            speed = throughput(torch, forward, tok.vocab_size, device, TIMED if device == "cuda" else 1)
            rewards = np.asarray(corpus_rewards(torch, forward, tok, texts, mode == "compile", device))
            if reference is None:
                reference = rewards  # eager fp32 comes first
            fid = fidelity_metrics(reference, rewards, groups)
            flops = result["gemm_tflops"][name] * 1e12
            result["cells"][cell] = {
                **speed,
                "fidelity": asdict(fid),
                "wall_s": time.perf_counter() - t0,
                "gemm_tflops": flops / 1e12,
                "fraction_of_gemm_peak": speed["seq_per_s"] * gflop_per_seq * 1e9 / flops,
            }
            base = result["cells"].get("eager-fp32", {}).get("seq_per_s")
            if base:
                result["cells"][cell]["vs_eager_fp32"] = speed["seq_per_s"] / base
            write(out, result)
            print(
                cell,
                json.dumps({k: result["cells"][cell][k] for k in ("seq_per_s", "ci95")}),
                json.dumps(result["cells"][cell]["fidelity"]),
                flush=True,
            )
            del model, forward
            if device == "cuda":
                torch.cuda.empty_cache()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prepare", type=Path, help="write corpus.json and model/ into this folder, then stop")
    p.add_argument("--model-name", default="minilm-rm", help="with --prepare: the rlsim reward model to ship")
    p.add_argument("--model", type=Path, help="HF sequence-classification folder (from --prepare)")
    p.add_argument("--corpus", type=Path, help="corpus.json from --prepare")
    p.add_argument("--out", type=Path, default=Path("gpu_precision.json"))
    p.add_argument("--modes", default="eager,compile", help="eager and/or compile (default both)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a quick check of the script")
    p.add_argument(
        "--gflop-per-seq",
        type=float,
        default=2.87,
        help="model FLOPs per 128-token sequence (MiniLM: 2.87, rlsim/hardware/flops.py)",
    )
    p.add_argument("--limit", type=int, default=None, help="score only the first N corpus texts (a quick check)")
    args = p.parse_args()
    if args.prepare:
        prepare(args.prepare, args.model_name)
        return 0
    if not (args.model and args.corpus):
        p.error("give --model and --corpus (written by --prepare), or --prepare DIR")
    modes = [m for m in args.modes.split(",") if m]
    measure(args.model, args.corpus, args.out, modes, args.device, args.limit, args.gflop_per_seq)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
