"""Precision variants: static int8 is calibrated reproducibly; bf16/fp16 run where the hardware has them, else skip."""

import json

import numpy as np
import pytest

from rlsim.corpus.agreement import spearman
from rlsim.scoring import SCORERS, ScorerSettings, make_scorer, unavailable_reason


def test_static_calibration_is_reproducible(minilm, tmp_path):
    from rlsim.scoring.int8_static_scorers import static_int8_graph

    a = static_int8_graph(minilm, count=8, out_dir=tmp_path / "a")
    b = static_int8_graph(minilm, count=8, out_dir=tmp_path / "b")
    assert a.read_bytes() == b.read_bytes()
    calibration = json.loads((a.parent / "calibration.json").read_text())
    assert calibration["texts"] == 8 and calibration["format"] == "QDQ"
    import onnx

    ops = {n.op_type for n in onnx.load(str(a)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops  # activations quantized too, not only weights


@pytest.mark.parametrize("runtime", ["ort-int8-static", "native-int8-static"])
def test_static_int8_keeps_most_of_the_ranking(minilm, texts, runtime):
    if runtime.startswith("native") and unavailable_reason(runtime):
        pytest.skip(unavailable_reason(runtime))
    # Texts cut to 128 tokens (a quarter of the scoring time): the ranking is the subject, not the length.
    settings = ScorerSettings(max_length=128)
    ref = make_scorer("eager", minilm, settings).score_batch(texts)
    out = make_scorer(runtime, minilm, settings).score_batch(texts)
    assert out.dtype == np.float32 and np.all(np.isfinite(out))
    assert 0 < np.abs(out - ref).max() and spearman(out, ref) > 0.5


@pytest.mark.parametrize("runtime", ["eager-bf16", "eager-fp16"])
def test_half_precision_runs_where_the_hardware_has_it(minilm, texts, runtime):
    device = "cuda" if runtime.endswith("fp16") else "cpu"
    reason = SCORERS.info(runtime).hardware_reason(runtime, device)
    if device == "cuda":
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip(f"{runtime}: no CUDA GPU on this machine")
    if reason:
        pytest.skip(reason)  # e.g. a CPU without avx512_bf16/amx_bf16
    settings = ScorerSettings(device=device, max_length=128)
    ref = make_scorer("eager", minilm, settings).score_batch(texts)
    out = make_scorer(runtime, minilm, settings).score_batch(texts)
    assert out.dtype == np.float32
    # 16-bit floats keep about 3 significant digits: close to fp32, and the order mostly kept.
    assert np.abs(out - ref).max() < 0.05 * max(1.0, float(np.abs(ref).max()))
    assert spearman(out, ref) > 0.9


@pytest.mark.slow  # the first use chooses the layers: a sensitivity report and a bisection (~30 s on tiny-llama-rm)
@pytest.mark.parametrize("runtime", ["ort-int8-mixed", "native-int8-mixed"])
def test_mixed_int8_runtimes_score_with_the_chosen_graph(tiny_llama_rm, texts, runtime):
    from rlsim.scoring.int8_mixed_scorers import mixed_int8_choice, mixed_int8_graph
    from rlsim.scoring.int8_sensitivity import graph_scores

    if runtime.startswith("native") and unavailable_reason(runtime):
        pytest.skip(unavailable_reason(runtime))
    settings = ScorerSettings(threads=1, max_length=128)
    scorer = make_scorer(runtime, tiny_llama_rm, settings)
    try:
        out = scorer.score_batch(texts)
    finally:
        scorer.close()
    graph = mixed_int8_graph(tiny_llama_rm)
    np.testing.assert_allclose(out, graph_scores(tiny_llama_rm, settings, graph, texts), atol=1e-5)
    choice = mixed_int8_choice(tiny_llama_rm)
    assert choice["calibration"]["split"] == "calibration" and choice["int8_nodes"]
    assert choice["pair_flip_rate"] <= choice["rules"]["max_pair_flip_rate"]
    assert len(choice["fp32_nodes"]) + len(choice["int8_nodes"]) == len(choice["sensitivity"])


def test_bf16_in_onnx_runtime_is_refused_by_name_with_the_reason() -> None:
    from rlsim.errors import RlsimError
    from rlsim.loop.config import RunConfig
    from rlsim.scoring import SCORERS

    for name in ("ort-bf16", "native-bf16"):
        assert name not in SCORERS
        with pytest.raises(RlsimError, match=f"'{name}' is not available: ONNX Runtime's CPU provider has no bf16"):
            SCORERS.get(name)
        with pytest.raises(ValueError, match="no bf16 MatMul on x86.*eager-bf16"):
            RunConfig.model_validate({"reward": {"runtime": name}})
    assert "unknown scoring runtime 'ort-bf17'" in SCORERS.unknown_message("ort-bf17")


def test_onnx_runtime_still_has_no_cpu_bf16_matmul() -> None:
    # What the refusal above says; when an ORT release adds the kernel this fails, and ort-bf16 can be built.
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    weight = helper.make_tensor("B", TensorProto.BFLOAT16, [4, 4], vals=bytes(32), raw=True)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["Y"])],
        "bf16",
        [helper.make_tensor_value_info("A", TensorProto.BFLOAT16, [4, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.BFLOAT16, [4, 4])],
        initializer=[weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with pytest.raises(Exception, match="NOT_IMPLEMENTED"):
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
