"""Score the fidelity corpus with runtimes and judge their rewards against fp32 eager's.

The metrics, the pass rules (``FidelityRules``) and the batches every runtime is scored in are
``rlsim.corpus.agreement``'s; here the runtimes are made and run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from rlsim.corpus.agreement import FidelityRules, fidelity_metrics, score_in_length_order
from rlsim.corpus.fidelity_corpus import FidelityCorpus, build_corpus
from rlsim.errors import RlsimError
from rlsim.scoring.base import SCORERS, UnsupportedRuntime, make_scorer

if TYPE_CHECKING:
    from rlsim.models.reward import RewardModelSpec
    from rlsim.scoring.base import ScorerSettings


def runtime_fidelity(
    spec: RewardModelSpec,
    runtimes: Sequence[str],
    settings: ScorerSettings,
    rules: FidelityRules | None = None,
    corpus: FidelityCorpus | None = None,
) -> dict[str, dict]:
    """Each runtime's fidelity on the corpus against eager's: ``{name: {metrics..., "ok": bool}}``.

    A runtime this machine cannot run gets ``{"skipped": reason}``, one that fails ``{"error": message}``;
    ``http`` is judged by the runtime its server wraps, so it is not scored again here.
    """
    rules = rules or FidelityRules()
    corpus = corpus or build_corpus()
    reference = _score_with("eager", spec, settings, corpus.texts)
    out: dict[str, dict] = {}
    for name in dict.fromkeys(runtimes):
        if SCORERS.info(name).server:
            out[name] = {"skipped": f"{name} scores with the runtime its server wraps ({settings.server_runtime})"}
            continue
        try:
            rewards = reference if name == "eager" else _score_with(name, spec, settings, corpus.texts)
            metrics = fidelity_metrics(reference, rewards, corpus.groups)
        except UnsupportedRuntime as err:
            out[name] = {"skipped": str(err)}
            continue
        except (RlsimError, ValueError) as err:
            out[name] = {"error": str(err), "ok": False}
            continue
        out[name] = {**metrics.as_dict(), "ok": rules.passes(SCORERS.info(name).reduced_precision, metrics)}
    return out


def _score_with(runtime: str, spec: RewardModelSpec, settings: ScorerSettings, texts: Sequence[str]) -> np.ndarray:
    scorer = make_scorer(runtime, spec, settings)
    try:
        return score_in_length_order(scorer, texts)
    finally:
        scorer.close()
