"""Bad input gives an empty result or one clear error naming the fix."""

import json

import numpy as np
import pytest

from rlsim.errors import RlsimError
from rlsim.models import resolve_reward_model
from rlsim.scoring import ScorerSettings, expand_runtimes, make_scorer
from rlsim.scoring.export import check_graph_matches, export_reward_model


def test_empty_list_scores_to_empty_array(minilm):
    out = make_scorer("ort", minilm).score_batch([])
    assert out.shape == (0,) and out.dtype == np.float32


def test_long_text_is_truncated_and_counted(minilm):
    scorer = make_scorer("ort", minilm, ScorerSettings(max_length=32))
    long_text = "word " * 200
    out = scorer.score_batch([long_text, "short"])
    assert scorer.stats.truncated == 1
    assert np.isfinite(out).all()
    # Left truncation keeps the end of the text, so only the last 31 words (+[CLS]/[SEP]) count:
    same_tail = "prefix that gets cut " * 50 + "word " * 40
    a, b = scorer.score_batch([long_text, same_tail])
    assert abs(a - b) < 1e-5


def test_non_string_text_is_rejected(minilm):
    with pytest.raises(RlsimError, match="not str"):
        make_scorer("ort", minilm).score_batch(["ok", 3])


def test_unknown_runtime_lists_valid_names():
    with pytest.raises(RlsimError, match="valid names: .*eager.*ort"):
        expand_runtimes("eager,tensorrt")


def test_unknown_model_names_builtins():
    with pytest.raises(RlsimError, match="minilm-rm"):
        resolve_reward_model("no-such-model")


def test_folder_without_reward_model(tmp_path):
    with pytest.raises(RlsimError, match="config.json"):
        resolve_reward_model(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    with pytest.raises(RlsimError, match="num_labels=1"):
        resolve_reward_model(tmp_path)


def test_onnx_that_does_not_match_its_model(minilm, tmp_path):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    path = tmp_path / "other.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with pytest.raises(RlsimError, match="does not match a reward model"):
        check_graph_matches(path, minilm)
    with pytest.raises(RlsimError, match="rlsim export"):
        check_graph_matches(tmp_path / "missing.onnx", minilm)


def test_export_has_fusions_and_dynamic_axes(minilm):
    ex = export_reward_model(minilm)
    assert ex.fusions.get("Attention", 0) == minilm.num_layers
    for path in (ex.plain, ex.optimized, ex.int8):
        check_graph_matches(path, minilm)


def test_unpaired_surrogate_is_a_clear_error(minilm):
    with pytest.raises(RlsimError, match="unpaired surrogate"):
        make_scorer("ort", minilm).score_batch(["fine", "bad \ud800 text"])


def test_export_never_replaces_a_users_folder(minilm, tmp_path):
    (tmp_path / "mine.txt").write_text("precious")
    with pytest.raises(RlsimError, match="not an rlsim export"):
        export_reward_model(minilm, tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "precious"
