"""Runtime fidelity kept per model, runtime and machine, so the next experiment or benchmark need not re-score.

Scoring the fidelity corpus takes seconds to a minute per runtime on a 2-core CPU, and its answer only changes
when something that changes the rewards changes. So an entry is keyed by all of that: the model's weights
(``RewardModelSpec.key``), the corpus (its digest), the runtime, device, threads and truncation, how a calibrated
int8 graph was built (range method, smoothing; only when not the default), the CPU (model and
the flags that pick kernels), the GPUs on ``cuda``, and the versions of rlsim, torch, onnxruntime and transformers.
An entry holds the metrics only: pass or fail is judged afresh with the caller's rules. One JSON file per key
under ``cache_dir()/fidelity/``, written atomically; a file that does not parse, or whose recorded key differs
from the one asked for, is ignored and overwritten, so a stale or broken cache costs a re-measurement, never a
wrong answer. Runtimes that were skipped or failed are never cached.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlsim.corpus.agreement import FidelityMetrics, FidelityRules
from rlsim.corpus.fidelity_corpus import FidelityCorpus, build_corpus
from rlsim.fidelity.check import runtime_fidelity
from rlsim.fingerprint import machine_fingerprint
from rlsim.io import atomic_write_json
from rlsim.paths import cache_dir
from rlsim.scoring import SCORERS

if TYPE_CHECKING:
    from rlsim.models.reward import RewardModelSpec
    from rlsim.scoring.base import ScorerSettings

METRICS = tuple(f.name for f in fields(FidelityMetrics))
VERSIONED = ("rlsim", "torch", "onnxruntime", "transformers")


def cache_key(spec: RewardModelSpec, runtime: str, settings: ScorerSettings, corpus_digest: str) -> dict[str, Any]:
    """Everything an entry's metrics depend on, as a JSON-ready dict."""
    machine = machine_fingerprint()
    key: dict[str, Any] = {
        "model": spec.key,
        "runtime": runtime,
        "corpus": corpus_digest,
        "device": settings.device,
        "threads": settings.resolved_threads(),
        "max_length": settings.max_length,
        "truncation": settings.truncation,
        "cpu_model": machine["cpu_model"],
        "cpu_flags": machine["cpu_flags"],
        "gpus": [g.get("name") for g in machine["gpus"]] if settings.device == "cuda" else [],
        "versions": {pkg: machine["versions"].get(pkg) for pkg in VERSIONED},
    }
    options = settings.int8_options()
    if options != type(options)():  # only then: the entries measured before these options existed stay valid
        key["int8"] = options.as_dict()
    return key


def entry_path(key: dict[str, Any], root: Path | None = None) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return (root or cache_dir() / "fidelity") / f"{key['runtime']}-{digest}.json"


def read_entry(key: dict[str, Any], root: Path | None = None) -> dict[str, float] | None:
    """The cached metrics for ``key``, or None when there is no clean entry."""
    try:
        data = json.loads(entry_path(key, root).read_text(encoding="utf-8"))
        metrics = {name: float(data["metrics"][name]) for name in METRICS}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return metrics if data.get("key") == key else None


def write_entry(key: dict[str, Any], metrics: dict[str, Any], root: Path | None = None) -> None:
    path = entry_path(key, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"key": key, "metrics": {name: metrics[name] for name in METRICS}})


def cached_runtime_fidelity(
    spec: RewardModelSpec,
    runtimes: Sequence[str],
    settings: ScorerSettings,
    rules: FidelityRules | None = None,
    corpus: FidelityCorpus | None = None,
    use_cache: bool = True,
    root: Path | None = None,
    measure: Callable[..., dict[str, dict]] = runtime_fidelity,
) -> dict[str, dict]:
    """``runtime_fidelity``'s answer (``{name: {metrics..., "ok"}}``, or ``skipped``/``error``) with each entry's
    ``source``: ``cache`` where a clean entry exists, else ``measured`` (and then cached).

    Only the runtimes without an entry are scored (with eager as the reference); all cached: nothing loads.
    ``measure`` is ``runtime_fidelity``'s signature, replaceable in tests.
    """
    rules = rules or FidelityRules()
    corpus = corpus or build_corpus()
    names = list(dict.fromkeys(runtimes))
    keys = {name: cache_key(spec, name, settings, corpus.digest) for name in names}
    out: dict[str, dict] = {}
    for name in names:
        metrics = read_entry(keys[name], root) if use_cache else None
        if metrics is not None:
            judged = rules.passes(SCORERS.info(name).reduced_precision, FidelityMetrics(**metrics))
            out[name] = {**metrics, "ok": judged, "source": "cache"}
    missing = [name for name in names if name not in out]
    if missing:
        for name, entry in measure(spec, missing, settings, rules, corpus).items():
            if all(m in entry for m in METRICS):
                write_entry(keys[name], entry, root)
            out[name] = {**entry, "source": "measured"}
    return {name: out[name] for name in names}
