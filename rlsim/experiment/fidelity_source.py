"""Each compared runtime's reward fidelity for the contention experiment: measured at the start, or read from a file.

Measured: the fidelity corpus is scored with fp32 eager and each runtime on this machine, as ``rlsim verify
--fidelity`` does it (``rlsim.fidelity.check``), with the model's own truncation limit so the answer is the same as
verify's; results are cached per model, runtime and machine (``rlsim.fidelity.cache``), so a second experiment
on the same machine reads them in a second. From a file: ``--fidelity FILE`` names the JSON of ``rlsim verify
--fidelity --json FILE`` (same reward model); the experiment re-judges its metrics with its own rules, so the
pass/fail is the same whichever way the metrics came.

``http`` scores with the runtime its server wraps, so it is judged by that runtime's fidelity; an external reward
server (``loop.reward.url``) cannot be judged here and is reported as unknown.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from rlsim.corpus.agreement import FidelityMetrics, FidelityRules
from rlsim.corpus.fidelity_corpus import build_corpus
from rlsim.errors import RlsimError
from rlsim.fidelity.cache import METRICS, cached_runtime_fidelity
from rlsim.io import read_user_text
from rlsim.models import resolve_reward_model
from rlsim.scoring import SCORERS  # the package: importing it registers every built-in runtime
from rlsim.scoring.base import ScorerSettings

if TYPE_CHECKING:
    from rlsim.experiment.config import ContentionConfig

FIX = "write one with `rlsim verify --fidelity --json FILE`"


def fix(flags: str) -> str:
    """``FIX`` with ``flags`` in the command (e.g. `` --runtimes eager,ort``)."""
    return f"write one with `rlsim verify --fidelity{flags} --json FILE`"


class FidelitySettings(BaseModel):
    """``check``: get each runtime's fidelity and rank by it (false: rank nothing, say so); ``file``: a
    ``rlsim verify --fidelity --json`` output to read instead of measuring; ``cache``: reuse measurements
    made on this machine; the pass rules for reduced precision (as ``rlsim verify``'s flags)."""

    model_config = ConfigDict(extra="forbid")

    check: bool = True
    file: str | None = None
    cache: bool = True
    max_pair_flip_rate: float = Field(0.02, ge=0, le=1)
    min_spearman: float = Field(0.99, ge=-1, le=1)

    def rules(self) -> FidelityRules:
        return FidelityRules(self.max_pair_flip_rate, self.min_spearman)


def judged_by(name: str, config: ContentionConfig) -> str | None:
    """The runtime whose rewards the compared ``name`` (a runtime or a variant) returns: itself, the wrapped one
    for ``http``; None where fidelity has no meaning here (``unjudged_reason`` says why)."""
    runtime = config.runtime_of(name)
    if runtime not in SCORERS:  # an unknown name is reported elsewhere
        return runtime
    info = SCORERS.info(runtime)
    if info.kind != "model":
        return None
    if not info.server:
        return runtime
    reward = config.reward_for(name)
    return None if reward.url else reward.server_runtime


def unjudged_reason(name: str, config: ContentionConfig) -> str:
    """Why ``name``'s fidelity is not judged (``judged_by`` is None)."""
    runtime = config.runtime_of(name)
    kind = SCORERS.info(runtime).kind if runtime in SCORERS else "model"
    if kind != "model":
        return f"{runtime} is a reward that is no model (kind {kind}): nothing to compare with a reward model"
    return "an external reward server (loop.reward.url): its model is not known here"


def fidelity_problems(config: ContentionConfig) -> list[str]:
    """What is wrong with ``contention.fidelity.file`` (unreadable, not a fidelity verify, another model, runtimes
    missing), every problem at once; empty when there is no file or it serves."""
    settings = config.contention.fidelity
    if not settings.check or settings.file is None:
        return []
    where = f"contention.fidelity.file {settings.file}"
    try:
        data = read_verify_json(settings.file)
    except RlsimError as err:
        return [f"{where}: {err}"]
    problems = []
    if not data.get("fidelity_rules") or not isinstance(data.get("runtimes"), dict):
        return [f"{where}: not the output of `rlsim verify --fidelity --json` (no fidelity_rules); {FIX}"]
    if not same_model(str(data.get("model")), config.loop.reward.model):
        problems.append(
            f"{where}: measured model {data.get('model')!r}, but loop.reward.model is "
            f"{config.loop.reward.model!r}; {fix(' --model ' + config.loop.reward.model)}"
        )
    wanted = list(dict.fromkeys(j for j in (judged_by(rt, config) for rt in config.contention.runtimes) if j))
    absent = [rt for rt in wanted if rt not in data["runtimes"]]
    if absent:
        problems.append(f"{where}: has no result for {', '.join(absent)}; {fix(' --runtimes ' + ','.join(wanted))}")
    return problems


def read_verify_json(path: str | Path) -> dict[str, Any]:
    text = read_user_text(Path(path), "fidelity file", missing_fix=FIX)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise RlsimError(f"not JSON ({err})") from None
    if not isinstance(data, dict):
        raise RlsimError(f"not a JSON object; {FIX}")
    return data


def same_model(recorded: str, configured: str) -> bool:
    """A built-in name equal, or two paths to one folder."""
    if recorded == configured:
        return True
    a, b = Path(recorded).expanduser(), Path(configured).expanduser()
    return a.exists() and b.exists() and a.resolve() == b.resolve()


def experiment_fidelity(config: ContentionConfig, say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """results.json's ``fidelity`` block: rules, where the figures came from, and per compared runtime
    ``{metrics..., ok, judged_by, source, failures, unknown_reason}`` (``ok`` None: unknown)."""
    settings = config.contention.fidelity
    if not settings.check:
        return {"checked": False, "words": "not checked (contention.fidelity.check: false)"}
    rules = settings.rules()
    judged = {rt: judged_by(rt, config) for rt in config.contention.runtimes}
    targets = list(dict.fromkeys(j for j in judged.values() if j is not None))
    if settings.file is not None:
        raw, source = _from_file(settings.file, targets), {"source": "file", "file": settings.file}
    else:
        raw, source = _measure(config, targets, rules, say), {"source": "measured"}
    about = raw.pop("_corpus", {})
    return {
        "checked": True,
        **source,
        **about,
        "rules": rules.as_dict(),
        "reference": "eager (fp32)",
        "runtimes": {rt: _judged(judged[rt], raw, rules, rt, config) for rt in config.contention.runtimes},
    }


def _measure(config: ContentionConfig, targets: list[str], rules: FidelityRules, say: Callable[[str], None]) -> dict:
    if not targets:  # every compared reward is no model, or an external server: nothing to score the corpus with
        return {}
    reward = config.loop.reward
    settings = ScorerSettings(  # verify's defaults, and the int8 graphs the loop's reward would build
        device=reward.device,
        server_runtime=reward.server_runtime,
        int8_calibration=reward.int8_calibration,  # type: ignore[arg-type]
        int8_smooth_alpha=reward.int8_smooth_alpha,
    )
    corpus = build_corpus()
    say(f"fidelity: scoring the corpus ({len(corpus.texts)} texts) with {', '.join(targets)} (cached ones are read)")
    out: dict[str, Any] = cached_runtime_fidelity(
        resolve_reward_model(reward.model), targets, settings, rules, corpus, use_cache=config.contention.fidelity.cache
    )
    out["_corpus"] = {"corpus": {"texts": len(corpus.texts), "groups": corpus.group_count, "digest": corpus.digest}}
    return out


def _from_file(path: str, targets: list[str]) -> dict[str, Any]:
    data = read_verify_json(path)
    out: dict[str, Any] = {}
    for rt in targets:
        entry = data["runtimes"].get(rt, {})
        if entry.get("fidelity"):
            out[rt] = {**entry["fidelity"], "source": "file"}
        else:
            out[rt] = {"skipped": entry.get("error") or "no fidelity figures in the file", "source": "file"}
    out["_corpus"] = {"corpus": data.get("fidelity_corpus"), "file_rules": data.get("fidelity_rules")}
    return out


def _judged(
    judge: str | None, raw: dict[str, Any], rules: FidelityRules, name: str, config: ContentionConfig
) -> dict[str, Any]:
    return _record(judge, raw, rules) if judge is not None else _unknown(None, unjudged_reason(name, config))


def _record(judge: str, raw: dict[str, Any], rules: FidelityRules) -> dict[str, Any]:
    """The fidelity of a runtime whose rewards are ``judge``'s, judged with ``rules`` (re-judged, whatever the
    source said)."""
    entry = raw.get(judge, {})
    if not all(m in entry for m in METRICS):
        why = entry.get("skipped") or entry.get("error") or "not measured"
        return _unknown(judge, f"{judge}: {why}", entry.get("source"))
    metrics = {m: entry[m] for m in METRICS}
    failures = rules.failures(SCORERS.info(judge).reduced_precision, FidelityMetrics(**metrics))
    return {
        **metrics,
        "ok": not failures,
        "judged_by": judge,
        "source": entry.get("source"),
        "failures": failures,
        "unknown_reason": None,
    }


def _unknown(judge: str | None, why: str, source: str | None = None) -> dict[str, Any]:
    return {"ok": None, "judged_by": judge, "source": source, "failures": [], "unknown_reason": why}
