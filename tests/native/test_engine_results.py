"""The native engine computes what ONNX Runtime's Python API computes, on the same graphs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.native_graphs import expected_reward, random_batch, reward_graph

pytestmark = pytest.mark.native


def ort_python(path: Path, feed: dict[str, np.ndarray]) -> np.ndarray:
    """Reference: the same graph through onnxruntime's Python API, rewards as (batch,)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feed)[0].reshape(-1)


def test_hand_graph_gives_the_worked_out_rewards(native: Any, sum_graph: Path, ort_library: Path) -> None:
    engine = native.Engine(sum_graph, ort_library)
    ids = np.array([[2, 4, 6], [10, 20, 30]], dtype=np.int64)
    mask = np.array([[1, 1, 0], [1, 0, 0]], dtype=np.int64)
    # Row 0: 0.5 * (2 + 4) + 1 = 4; row 1: 0.5 * 10 + 1 = 6.
    out = engine.run(ids, mask)
    assert out.dtype == np.float32 and out.shape == (2,)
    np.testing.assert_array_equal(out, [4.0, 6.0])


@pytest.mark.parametrize("shape", [(1, 1), (1, 37), (3, 16), (8, 64)])
def test_tiny_bert_matches_onnxruntime_python(tiny_bert_engine: Any, tiny_bert: Path, shape: tuple[int, int]) -> None:
    ids, mask = random_batch(*shape, seed=shape[0] * 100 + shape[1])
    out = tiny_bert_engine.run(ids, mask)
    ref = ort_python(tiny_bert, {"input_ids": ids, "attention_mask": mask})
    assert out.dtype == np.float32 and out.shape == (shape[0],)
    assert np.abs(out - ref).max() <= 1e-5
    assert np.ptp(ref) > 0 or shape[0] == 1  # rows differ, so a wrong row order would show


def test_token_type_ids_are_fed_as_zeros(native: Any, tiny_bert_token_types: Path, ort_library: Path) -> None:
    engine = native.Engine(tiny_bert_token_types, ort_library, intra_op_threads=1)
    assert engine.input_names == ["input_ids", "attention_mask", "token_type_ids"]
    ids, mask = random_batch(4, 24, seed=3)
    ref = ort_python(
        tiny_bert_token_types, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    )
    assert np.abs(engine.run(ids, mask) - ref).max() <= 1e-5


def test_hand_graph_token_type_zeros_survive_growing_batches(native: Any, graphs: Path, ort_library: Path) -> None:
    # The graph adds 1000 * token_type_ids: anything but zeros (stale or unowned memory) would show.
    engine = native.Engine(reward_graph(graphs / "tt.onnx", token_type_ids=True), ort_library)
    for batch, seq in [(1, 2), (4, 50), (2, 3), (16, 128)]:
        ids, mask = random_batch(batch, seq, seed=batch + seq)
        np.testing.assert_allclose(engine.run(ids, mask), expected_reward(ids, mask), rtol=1e-6)


def test_rank_one_output_is_accepted(native: Any, graphs: Path, ort_library: Path) -> None:
    engine = native.Engine(reward_graph(graphs / "rank1.onnx", out_rank=1), ort_library)
    ids, mask = random_batch(5, 9, seed=5)
    np.testing.assert_allclose(engine.run(ids, mask), expected_reward(ids, mask), rtol=1e-6)


def test_non_contiguous_inputs_are_read_correctly(tiny_bert_engine: Any, tiny_bert: Path) -> None:
    ids, mask = random_batch(6, 40, seed=11)
    strided_ids, strided_mask = ids[::2, ::2], mask[::2, ::2]  # views, not C-contiguous
    assert not strided_ids.flags.c_contiguous
    ref = ort_python(
        tiny_bert,
        {"input_ids": np.ascontiguousarray(strided_ids), "attention_mask": np.ascontiguousarray(strided_mask)},
    )
    assert np.abs(tiny_bert_engine.run(strided_ids, strided_mask) - ref).max() <= 1e-5


@pytest.mark.parametrize("optimization", ["disable", "basic", "extended", "all"])
@pytest.mark.parametrize("spinning", [True, False])
def test_session_settings_do_not_change_results(
    native: Any, tiny_bert: Path, ort_library: Path, optimization: str, spinning: bool
) -> None:
    engine = native.Engine(
        tiny_bert, ort_library, intra_op_threads=2, inter_op_threads=1, spinning=spinning, optimization=optimization
    )
    assert engine.options["optimization"] == optimization and engine.options["spinning"] is spinning
    ids, mask = random_batch(4, 32, seed=7)
    ref = ort_python(tiny_bert, {"input_ids": ids, "attention_mask": mask})
    assert np.abs(engine.run(ids, mask) - ref).max() <= 1e-5


def test_parallel_execution_mode_runs(native: Any, tiny_bert: Path, ort_library: Path) -> None:
    engine = native.Engine(tiny_bert, ort_library, inter_op_threads=2, execution_mode="parallel")
    ids, mask = random_batch(2, 8, seed=1)
    ref = ort_python(tiny_bert, {"input_ids": ids, "attention_mask": mask})
    assert np.abs(engine.run(ids, mask) - ref).max() <= 1e-5


def test_engine_describes_itself(tiny_bert_engine: Any, tiny_bert: Path, ort_library: Path) -> None:
    import onnxruntime

    assert tiny_bert_engine.input_names == ["input_ids", "attention_mask"]
    assert tiny_bert_engine.output_names == ["logits"]
    # The library found in the installed package is the same release as its Python module.
    assert tiny_bert_engine.ort_version == onnxruntime.__version__
    assert Path(tiny_bert_engine.ort_library) == ort_library.resolve()
    assert Path(tiny_bert_engine.model_path) == tiny_bert
    assert tiny_bert_engine.active_runs == 0
    assert "tiny_bert.onnx" in repr(tiny_bert_engine)


@pytest.mark.gpu
def test_cuda_engine_matches_cpu(native: Any, tiny_bert: Path, ort_library: Path) -> None:
    import onnxruntime

    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        pytest.skip("needs onnxruntime-gpu (CUDAExecutionProvider) and a CUDA GPU")
    ids, mask = random_batch(4, 32, seed=9)
    cpu = native.Engine(tiny_bert, ort_library).run(ids, mask)
    cuda = native.Engine(tiny_bert, ort_library, device="cuda").run(ids, mask)
    assert np.abs(cuda - cpu).max() <= 1e-4  # different kernels: float32 rounding differs
