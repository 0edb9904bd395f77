"""The int8 build options: calibrated ranges (minmax / percentile / entropy) and SmoothQuant smoothing.

The smoothing is checked where it can be exact: without quantization the smoothed fp32 graph must give the plain
graph's outputs (X/s times diag(s)W is XW), on texts that took no part in the statistics, while its weights did
change. The options are checked on real static graphs (few calibration texts, so each build takes seconds): each
changes the graph's bytes, the same option gives the same bytes, and ``calibration.json`` says what was done.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlsim.errors import ConfigError, RlsimError
from rlsim.scoring.base import ScorerSettings, int8_setting_problems
from rlsim.scoring.int8_options import Int8Options

COUNT = 8  # calibration texts: one batch, enough to make ranges, a few seconds per graph
# (activation tensors, MatMuls) smoothed: per block, q/k/v share one scale, then the attention output, then the FFN
# input(s) (gate/up share one in Llama), then the FFN output: tiny-llama-rm's 4 blocks (+ its score MatMul),
# minilm-rm's 6 BERT blocks (its pooler and classifier are Gemms, left as they are).
SMOOTHED = {"tiny-llama-rm": (4 * 4 + 1, 4 * 7 + 1), "minilm-rm": (6 * 4, 6 * 6)}


def _session(graph: Path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(graph), so, providers=["CPUExecutionProvider"])


def _run(graph: Path, batch: dict[str, np.ndarray]) -> np.ndarray:
    session = _session(graph)
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in batch.items() if k in names})[0]


def test_scales_are_the_papers_formula() -> None:
    from rlsim.scoring.int8_smoothing import smoothing_scales

    x_max, w_max = np.array([4.0, 1.0, 0.0, 9.0]), np.array([1.0, 4.0, 2.0, 0.0])
    # alpha 0.5: sqrt(4)/sqrt(1) = 2, sqrt(1)/sqrt(4) = 0.5; a channel all zero in X or in W keeps s = 1
    np.testing.assert_allclose(smoothing_scales(x_max, w_max, 0.5), [2.0, 0.5, 1.0, 1.0])
    # alpha 1: s = max|X| (all the range moves to the weights)
    np.testing.assert_allclose(smoothing_scales(x_max, w_max, 1.0), [4.0, 1.0, 1.0, 1.0])


def test_one_scale_per_activation_and_its_other_readers_untouched(tmp_path: Path) -> None:
    """Two MatMuls read X (one shared s, max|W| over both weights) and an Add reads X too (it must keep X)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from rlsim.scoring.int8_smoothing import smooth_graph

    rng = np.random.default_rng(0)
    w1, w2 = rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=(4, 3)).astype(np.float32)
    w2[1] *= 10  # channel 1's weight range comes from w2
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["y1"], name="a"),
        helper.make_node("MatMul", ["x", "w2"], ["y2"], name="b"),
        helper.make_node("Add", ["x", "x"], ["twice"], name="residual"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y1", "y2", "twice")],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    plain = tmp_path / "plain.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(plain))
    x = np.array([[8.0, -1.0, 0.5, 2.0], [-2.0, 0.25, 0.5, -4.0]], dtype=np.float32)
    record = smooth_graph(plain, tmp_path / "smooth.onnx", [{"x": x}], alpha=0.5)

    assert record["activations"] == 1 and record["smoothed"][0]["matmuls"] == ["a", "b"]
    model = onnx.load(str(tmp_path / "smooth.onnx"))
    readers = {n.name: list(n.input) for n in model.graph.node}
    assert readers["residual"] == ["x", "x"] and readers["a"][0] == readers["b"][0] != "x"
    weights = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    s = np.sqrt(np.abs(x).max(0)) / np.sqrt(np.maximum(np.abs(w1).max(1), np.abs(w2).max(1)))
    np.testing.assert_allclose(weights["w1"], w1 * s[:, None].astype(np.float32), rtol=1e-6)
    before, after = _session(plain).run(None, {"x": x}), _session(tmp_path / "smooth.onnx").run(None, {"x": x})
    for a, b in zip(before, after, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model", ["tiny-llama-rm", "minilm-rm"])
def test_smoothing_alone_keeps_the_fp32_outputs(model: str, tmp_path: Path) -> None:
    from rlsim.corpus.fidelity_corpus import calibration_texts
    from rlsim.models import resolve_reward_model
    from rlsim.scoring.export import export_reward_model
    from rlsim.scoring.int8_smoothing import calibration_batches, smooth_graph
    from rlsim.scoring.tokenizing import load_reward_tokenizer

    spec = resolve_reward_model(model)
    plain = export_reward_model(spec).plain
    record = smooth_graph(plain, tmp_path / "smooth.onnx", calibration_batches(spec, COUNT), alpha=0.5)
    assert (record["activations"], record["matmuls"]) == SMOOTHED[model]
    assert any(e["scale_min"] < 0.9 or e["scale_max"] > 1.1 for e in record["smoothed"])  # weights really moved
    # Texts the statistics never saw: the identity must not depend on them.
    texts = calibration_texts(COUNT + 4)[COUNT:]
    enc = load_reward_tokenizer(spec, ScorerSettings())(texts, padding=True, truncation=True, return_tensors="np")
    batch = {k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask")}
    reference, smoothed = _run(plain, batch), _run(tmp_path / "smooth.onnx", batch)
    np.testing.assert_allclose(smoothed, reference, rtol=1e-5, atol=1e-5 * float(np.abs(reference).max()))


def _static(spec, tmp_path: Path, name: str, options: Int8Options) -> tuple[bytes, dict]:
    from rlsim.scoring.int8_static_scorers import static_int8_graph

    graph = static_int8_graph(spec, count=COUNT, out_dir=tmp_path / name, options=options)
    return graph.read_bytes(), json.loads((graph.parent / "calibration.json").read_text())


@pytest.fixture(scope="module")
def minmax_static(tiny_llama_rm, tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, dict]:
    """tiny-llama-rm's static graph as every option changes it: MinMax, no smoothing."""
    return _static(tiny_llama_rm, tmp_path_factory.mktemp("minmax"), "minmax", Int8Options())


def test_percentile_ranges_give_their_own_graph_reproducibly(tiny_llama_rm, minmax_static, tmp_path: Path) -> None:
    minmax, minmax_info = minmax_static
    percentile, info = _static(tiny_llama_rm, tmp_path, "percentile", Int8Options("percentile"))
    again, _ = _static(tiny_llama_rm, tmp_path, "percentile-again", Int8Options("percentile"))
    assert percentile != minmax and percentile == again
    assert (minmax_info["method"], info["method"]) == ("MinMax", "Percentile")
    assert info["method_options"] == {"num_bins": 2048, "percentile": 99.999, "symmetric": True}
    assert info["smoothing"] is None and info["texts"] == COUNT


def test_entropy_ranges_clip_outliers_that_minmax_keeps(tmp_path: Path) -> None:
    """With ORT's default 128 bins (= its 128 quantized bins) entropy had one candidate, the full range, and gave
    MinMax's graph byte for byte; with 2048 bins searched down to 128 it clips a long tail. On one MatMul, since
    ORT's KL search is Python loops (about a minute over tiny-llama-rm's 29 MatMuls)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization.calibrate import load_tensors_data

    from rlsim.scoring.int8_static_scorers import RANGE_METHODS, _histogram_ranges

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        "one-matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 8])],
        initializer=[weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "mm.onnx")
    # Mostly N(0, 1), with a few values 40 sigma out: MinMax keeps them, the KL threshold does not.
    batches = []
    for _ in range(4):
        x = rng.standard_normal((256, 16)).astype(np.float32)
        x[rng.integers(0, 256, 2), rng.integers(0, 16, 2)] = 40.0
        batches.append({"x": x})
    method, options = RANGE_METHODS["entropy"]
    _histogram_ranges(tmp_path / "mm.onnx", batches, method, options, tmp_path / "ranges.json")
    low, high = load_tensors_data(tmp_path / "ranges.json")["x"].range_value
    top = max(float(np.abs(b["x"]).max()) for b in batches)
    assert top == 40.0 and 0 < float(high) < 0.5 * top and float(low) > -0.5 * top


def test_smoothing_gives_its_own_graph_reproducibly_and_says_what_moved(
    tiny_llama_rm, minmax_static, tmp_path: Path
) -> None:
    plain, _ = minmax_static
    smoothed, info = _static(tiny_llama_rm, tmp_path, "sq", Int8Options(smooth_alpha=0.5))
    again, _ = _static(tiny_llama_rm, tmp_path, "sq-again", Int8Options(smooth_alpha=0.5))
    assert smoothed != plain and smoothed == again
    assert info["method"] == "MinMax" and info["smoothing"]["alpha"] == 0.5
    assert (info["smoothing"]["activations"], info["smoothing"]["matmuls"]) == SMOOTHED["tiny-llama-rm"]


def test_default_options_keep_the_cache_folders_and_fidelity_keys() -> None:
    from rlsim.fidelity.cache import cache_key
    from rlsim.models import resolve_reward_model

    assert Int8Options().static_suffix == "" and Int8Options().smoothing_suffix == ""
    assert Int8Options("entropy", 0.5).static_suffix == "-entropy-sq0.5"
    assert Int8Options("minmax", 1).smoothing_suffix == "-sq1.0"
    assert Int8Options(smooth_alpha=0.1234567891).smoothing_suffix == "-sq0.1234567891"  # no two alphas share
    spec = resolve_reward_model("minilm-rm")
    assert "int8" not in cache_key(spec, "ort-int8-static", ScorerSettings(), "d")
    smoothed = cache_key(spec, "ort-int8-static", ScorerSettings(int8_smooth_alpha=0.5), "d")
    assert smoothed["int8"] == {"calibration": "minmax", "smooth_alpha": 0.5}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"int8_calibration": "kl"},
            r"int8_calibration: unknown range method 'kl'; valid: minmax, percentile, entropy",
        ),
        ({"int8_smooth_alpha": 0}, r"int8_smooth_alpha: 0 is not a number in \(0, 1\]"),
        ({"int8_smooth_alpha": 1.5}, r"int8_smooth_alpha: 1.5 is not a number in \(0, 1\].*leave it unset"),
        ({"int8_smooth_alpha": True}, r"int8_smooth_alpha: True is not a number"),
    ],
)
def test_bad_values_are_refused_naming_the_fix(values: dict, message: str) -> None:
    from rlsim.bench.scoring_worker import scorer_settings

    with pytest.raises(RlsimError, match=message):
        ScorerSettings(**values)
    with pytest.raises(RlsimError, match=message):
        scorer_settings(values)  # rlsim bench scoring's settings (its preflight makes them first)


def test_run_config_and_cli_refuse_bad_or_unread_values(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from rlsim.cli.main import main
    from rlsim.loop.config import load_run_config

    config = tmp_path / "run.yaml"
    config.write_text("reward: {runtime: ort-int8-static}\n")
    ok = load_run_config(config, ["reward.int8_calibration=entropy", "reward.int8_smooth_alpha=0.5"])
    assert (ok.reward.int8_calibration, ok.reward.int8_smooth_alpha) == ("entropy", 0.5)
    with pytest.raises(ConfigError, match=r"reward.int8_smooth_alpha: .*2 is not a number in \(0, 1\]"):
        load_run_config(config, ["reward.int8_smooth_alpha=2"])
    with pytest.raises(ConfigError, match="reward.int8_calibration: .*valid: minmax, percentile, entropy"):
        load_run_config(config, ["reward.int8_calibration=kl"])
    with pytest.raises(ConfigError, match="reward.int8_calibration: applies to ort-int8-static, native-int8-static"):
        load_run_config(config, ["reward.runtime=ort-int8-mixed", "reward.int8_calibration=entropy"])
    assert load_run_config(config, ["reward.runtime=ort-int8-mixed", "reward.int8_smooth_alpha=0.5"])
    assert main(["verify", "--runtimes", "ort-int8-static", "--int8-smooth-alpha", "0"]) == 2
    err = capsys.readouterr().err
    assert "--int8-smooth-alpha" in err and "(0, 1]" in err


def test_a_run_config_hands_its_int8_options_to_the_scoring_stage(tmp_path: Path) -> None:
    from rlsim.loop.config import load_run_config
    from rlsim.loop.roles.build import reward_settings
    from rlsim.placement import ResolvedPlacement

    config = tmp_path / "run.yaml"
    config.write_text("reward: {runtime: native-int8-static, int8_calibration: percentile, int8_smooth_alpha: 0.5}\n")
    stage = reward_settings(load_run_config(config, []), ResolvedPlacement(cores=(0,), threads=1))
    assert (stage.runtime, stage.int8_calibration, stage.int8_smooth_alpha) == ("native-int8-static", "percentile", 0.5)


def test_only_runtimes_that_read_a_setting_take_it() -> None:
    entropy = ScorerSettings(int8_calibration="entropy")
    assert int8_setting_problems(entropy, ["ort-int8-static", "eager"]) == []
    (problem,) = int8_setting_problems(entropy, ["ort", "ort-int8-mixed"], where="settings.")
    assert problem.startswith("settings.int8_calibration: applies to ort-int8-static, native-int8-static only")
    assert int8_setting_problems(ScorerSettings(int8_smooth_alpha=0.5), ["native-int8-mixed"]) == []
    assert int8_setting_problems(ScorerSettings(), ["eager"]) == []


@pytest.mark.slow  # builds tiny-llama-rm's 64-text graphs (and a mixed choice) on the first run: about a minute
@pytest.mark.parametrize(
    ("runtime", "folder"),
    [
        ("ort-int8-static", "-percentile-sq0.5"),
        ("native-int8-static", "-percentile-sq0.5"),
        ("ort-int8-mixed", "-sq0.5"),
        ("native-int8-mixed", "-sq0.5"),
    ],
)
def test_runtimes_score_with_the_graph_their_options_name(tiny_llama_rm, texts, runtime: str, folder: str) -> None:
    from rlsim.scoring import make_scorer

    settings = ScorerSettings(threads=1, int8_calibration="percentile", int8_smooth_alpha=0.5)
    if runtime.startswith("native"):
        pytest.importorskip("rlsim._native")
    scorer = make_scorer(runtime, tiny_llama_rm, settings)
    try:
        rewards = scorer.score_batch(texts[:8])
        graph = Path(scorer.graph_path)  # type: ignore[attr-defined]
    finally:
        scorer.close()
    assert graph.parent.name.endswith(folder) and np.all(np.isfinite(rewards))
    record = json.loads((graph.parent / ("choice.json" if "mixed" in runtime else "calibration.json")).read_text())
    assert record["smoothing"]["alpha"] == 0.5
