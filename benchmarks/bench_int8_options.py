"""Issue 30, item 2: do calibrated ranges (percentile, entropy) or SmoothQuant smoothing keep int8's reward order?

Every graph is built on the fidelity corpus's calibration split only (64 texts for the static ranges and the
smoothing statistics; the mixed choice on the calibration corpus) and judged once on the evaluation corpus
(``build_corpus``, what ``rlsim verify --fidelity`` judges with), against fp32 eager on the same texts: within-group
pair flips and Spearman, and the fidelity rules (pair flips <= 2%, Spearman >= 0.99). Nothing is tuned on the
evaluation corpus: alpha is SmoothQuant's default 0.5 and the range methods take ONNX Runtime's own defaults.

Cells, per model: ``ort-int8`` (dynamic, for comparison), ``ort-int8-static`` with each range method
(``minmax``, ``percentile``, ``entropy``), each without and with smoothing (alpha 0.5), and with ``--mixed``
``ort-int8-mixed`` without and with smoothing (a mixed choice takes minutes on the first use). A graph is built
the first time it is asked for and cached (``cache_dir()/onnx``); ``build_s`` is the wall time of that first
``make_scorer`` (0-ish when the cache held it: ``cached`` says which).

    .venv/bin/python benchmarks/bench_int8_options.py                       # minilm-rm, static cells
    .venv/bin/python benchmarks/bench_int8_options.py --models minilm-rm,tiny-llama-rm --mixed
    .venv/bin/python benchmarks/bench_int8_options.py --out /tmp/int8.json --alphas 0.5,0.8   # more alphas

Writes ``benchmarks/results/bench_int8_options.json`` (the machine's fingerprint, the date, the command); the last
stdout line is one JSON object: each cell's pair flips, Spearman and pass.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rlsim.corpus.agreement import FidelityRules, fidelity_metrics, score_in_length_order  # noqa: E402
from rlsim.corpus.fidelity_corpus import FidelityCorpus, build_corpus  # noqa: E402
from rlsim.fingerprint import machine_fingerprint  # noqa: E402
from rlsim.io import atomic_write_json  # noqa: E402
from rlsim.models import resolve_reward_model  # noqa: E402
from rlsim.paths import cache_dir  # noqa: E402
from rlsim.scoring import make_scorer  # noqa: E402
from rlsim.scoring.base import ScorerSettings  # noqa: E402
from rlsim.scoring.int8_options import CALIBRATION_METHODS  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "bench_int8_options.json"


def cells(alphas: list[float | None], mixed: bool) -> list[tuple[str, str, float | None]]:
    """(runtime, range method, alpha) in run order; the method is moot for the dynamic runtimes."""
    out: list[tuple[str, str, float | None]] = [("ort-int8", "minmax", None)]
    out += [("ort-int8-static", m, a) for m in CALIBRATION_METHODS for a in alphas]
    if mixed:
        out += [("ort-int8-mixed", "minmax", a) for a in alphas]
    return out


def measure(model: str, todo: list[tuple[str, str, float | None]], corpus: FidelityCorpus) -> dict[str, Any]:
    spec = resolve_reward_model(model)
    rules = FidelityRules()
    reference = _scores("eager", spec, ScorerSettings(), corpus)[0]
    rows = []
    for runtime, method, alpha in todo:
        settings = ScorerSettings(int8_calibration=method, int8_smooth_alpha=alpha)  # type: ignore[arg-type]
        print(f"{model}: {runtime} {method} alpha={alpha}", file=sys.stderr, flush=True)
        rewards, build_s, graph = _scores(runtime, spec, settings, corpus)
        m = fidelity_metrics(reference, rewards, corpus.groups)
        rows.append({"runtime": runtime, "calibration": method if runtime == "ort-int8-static" else None,
                     "smooth_alpha": alpha, **m.as_dict(), "passes": rules.passes(True, m),
                     "build_s": round(build_s, 1), "cached": build_s < 2.0, "graph": graph,
                     "record": _record(Path(graph))})  # fmt: skip
        print(f"  flips {m.pair_flip_rate:.4f} spearman {m.spearman:.4f} ({build_s:.0f} s)", file=sys.stderr)
    return {"model": model, "reference": "eager (fp32) on the same texts", "rules": rules.as_dict(), "cells": rows}


def _scores(runtime: str, spec, settings: ScorerSettings, corpus: FidelityCorpus) -> tuple[Any, float, str]:
    t0 = time.perf_counter()
    scorer = make_scorer(runtime, spec, settings)
    build_s = time.perf_counter() - t0
    try:
        return score_in_length_order(scorer, corpus.texts), build_s, str(getattr(scorer, "graph_path", ""))
    finally:
        scorer.close()


def _record(graph: Path) -> dict[str, Any] | None:
    """What the graph was built with: calibration.json (static) or choice.json's summary (mixed)."""
    for name in ("calibration.json", "choice.json"):
        path = graph.parent / name
        if path.is_file():
            data = json.loads(path.read_text())
            smoothing = data.get("smoothing")
            summary = {k: data[k] for k in ("method", "method_options", "fp32_nodes", "pair_flip_rate", "spearman")
                       if k in data}  # fmt: skip
            if smoothing:
                summary["smoothing"] = {k: smoothing[k] for k in ("alpha", "activations", "matmuls")}
            return {"file": name, **summary}
    return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="minilm-rm", help="comma-separated (default minilm-rm)")
    parser.add_argument("--alphas", default="none,0.5", help="smoothing alphas, 'none' for none (default none,0.5)")
    parser.add_argument("--mixed", action="store_true", help="add ort-int8-mixed (minutes per new choice)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"JSON file (default {OUT})")
    args = parser.parse_args(argv)
    alphas = [None if a.strip() == "none" else float(a) for a in args.alphas.split(",")]
    ScorerSettings(int8_smooth_alpha=next((a for a in alphas if a is not None), None))  # bad alpha: fail first
    corpus = build_corpus()
    started = datetime.datetime.now(datetime.UTC)
    results = [measure(m.strip(), cells(alphas, args.mixed), corpus) for m in args.models.split(",")]
    data = {
        "command": "python benchmarks/bench_int8_options.py " + " ".join(argv),
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine_fingerprint(),
        "cache": str(cache_dir()),
        "corpus": {
            "split": "evaluation",
            "texts": len(corpus.texts),
            "groups": corpus.group_count,
            "digest": corpus.digest,
        },
        "models": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out, data)  # a run stopped mid-write leaves the previous results whole
    shown = ("runtime", "calibration", "smooth_alpha", "pair_flip_rate", "spearman", "passes")
    summary = {r["model"]: [{k: c[k] for k in shown} for c in r["cells"]] for r in results}
    print(json.dumps({"out": str(args.out), "cells": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
