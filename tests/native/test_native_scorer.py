"""The ``native`` and ``native-int8`` scorers on the built-in reward models, against ``ort``.

Both load the same exported graph with the same session settings, so they must agree to float32
rounding; the comparison with the eager reference lives in tests/scoring/test_runtimes_agree.py.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

from rlsim.errors import RlsimError
from rlsim.scoring import ScorerSettings, make_scorer

pytestmark = pytest.mark.native


@pytest.fixture(scope="module")
def texts() -> list[str]:
    from rlsim.fidelity.verify import verification_texts

    return verification_texts()


@pytest.fixture(scope="module", params=["minilm-rm", "tiny-llama-rm"])
def spec(request: pytest.FixtureRequest) -> Any:
    from rlsim.models import resolve_reward_model

    return resolve_reward_model(request.param)


@pytest.mark.parametrize(("native_name", "ort_name"), [("native", "ort"), ("native-int8", "ort-int8")])
def test_native_matches_ort_on_the_same_graph(
    native: Any, spec: Any, texts: list[str], native_name: str, ort_name: str
) -> None:
    settings = ScorerSettings(threads=2)
    scorer = make_scorer(native_name, spec, settings)
    out = scorer.score_batch(texts)
    ref = make_scorer(ort_name, spec, settings).score_batch(texts)
    assert out.dtype == np.float32 and out.shape == (len(texts),)
    assert np.abs(out - ref).max() <= 1e-5
    assert scorer.stats.sequences == len(texts) and scorer.stats.batches == 1
    assert scorer.graph_path.name == ("model.int8.onnx" if native_name.endswith("int8") else "model.opt.onnx")


def test_empty_list_scores_to_empty(native: Any, spec: Any) -> None:
    out = make_scorer("native", spec).score_batch([])
    assert out.dtype == np.float32 and out.shape == (0,)


def test_unbuilt_engine_gives_one_clear_error(spec: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rlsim._native", None)
    with pytest.raises(
        RlsimError, match=r"runtime 'native' needs rlsim\._native, which is not installed: run `make native`"
    ):
        make_scorer("native", spec)


def test_wrong_library_path_gives_one_clear_error(native: Any, spec: Any, tmp_path: Any) -> None:
    settings = ScorerSettings(ort_path=str(tmp_path / "libonnxruntime.so"))
    with pytest.raises(RlsimError, match="libonnxruntime.so does not exist"):
        make_scorer("native", spec, settings)


def test_scorer_closes(native: Any, spec: Any, texts: list[str]) -> None:
    scorer = make_scorer("native", spec, ScorerSettings(threads=1, spinning=False))
    assert scorer.ort_version
    scorer.score_batch(texts[:2])
    scorer.close()
    assert scorer._engine is None
