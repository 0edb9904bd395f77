"""Every way to misuse the native engine raises a Python exception that says what is wrong."""

from __future__ import annotations

import ctypes.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.native_graphs import reward_graph

pytestmark = pytest.mark.native

IDS = np.ones((2, 5), dtype=np.int64)


@pytest.fixture(scope="module")
def engine(native: Any, sum_graph: Path, ort_library: Path) -> Any:
    return native.Engine(sum_graph, ort_library)


# --- bad input to run() -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ids", "mask", "message"),
    [
        (IDS.astype(np.int32), IDS, "input_ids has dtype int32"),
        (IDS, IDS.astype(np.float32), "attention_mask has dtype float32"),
        (IDS[0], IDS[0], "input_ids has rank 1"),
        (IDS[None], IDS[None], "rank 3"),
        (np.int64(3), np.int64(1), "rank 0"),
        (IDS, IDS[:, :3], r"shape \(2, 5\) but attention_mask has \(2, 3\)"),
        (IDS, IDS[:1], "they must match"),
        (np.zeros((2, 0), np.int64), np.zeros((2, 0), np.int64), "sequence length is 0"),
        ("not ids", IDS, "input_ids has dtype <U7"),
        (IDS.astype(">i8"), IDS, "input_ids has dtype >i8"),  # byte-swapped: would be misread
    ],
)
def test_bad_input_raises_value_error(engine: Any, ids: Any, mask: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        engine.run(ids, mask)


def test_every_int64_spelling_is_accepted(engine: Any) -> None:
    # np.longlong is a distinct NumPy type with the same layout as int64; lists convert to int64.
    ids = np.array([[2, 4]], dtype=np.longlong)
    np.testing.assert_array_equal(engine.run(ids, np.ones_like(ids)), [4.0])
    np.testing.assert_array_equal(engine.run([[2, 4]], [[1, 1]]), [4.0])


def test_empty_batch_gives_empty_rewards(engine: Any) -> None:
    out = engine.run(np.zeros((0, 7), np.int64), np.zeros((0, 7), np.int64))
    assert out.dtype == np.float32 and out.shape == (0,)


def test_token_ids_outside_the_vocabulary_raise_runtime_error(tiny_bert_engine: Any) -> None:
    ids = np.full((1, 4), 10_000, dtype=np.int64)
    with pytest.raises(RuntimeError, match=r"failed to run .* shape \(1, 4\).*out of data bounds"):
        tiny_bert_engine.run(ids, np.ones_like(ids))
    assert tiny_bert_engine.active_runs == 0  # the failed run is no longer counted


def test_fixed_batch_model_names_the_size_it_needs(native: Any, graphs: Path, ort_library: Path) -> None:
    engine = native.Engine(reward_graph(graphs / "fixed.onnx", batch_dim=2), ort_library)
    assert engine.run(IDS, IDS).shape == (2,)
    with pytest.raises(ValueError, match="fixed batch size 2"):
        engine.run(IDS[:1], IDS[:1])


# --- models that are not reward models: clear errors at load ------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"id_type": 6}, "input 'input_ids' is int32 .* engine feeds int64"),  # 6: TensorProto.INT32
        ({"extra_input": "pixel_values"}, "has input 'pixel_values'"),
        ({"with_mask": False}, "must take both input_ids and attention_mask"),
        ({"labels": 2}, r"shape \(batch, 2\)|shape \(-1, 2\).*one label"),
        ({"out_type": 11}, "output 'logits' is float64"),  # 11: TensorProto.DOUBLE
    ],
)
def test_mismatched_model_fails_at_load(
    native: Any, graphs: Path, ort_library: Path, kwargs: dict, message: str
) -> None:
    path = reward_graph(graphs / f"bad_{'_'.join(map(str, kwargs))}.onnx", **kwargs)
    with pytest.raises(RuntimeError, match=message):
        native.Engine(path, ort_library)


def test_missing_model_file(native: Any, tmp_path: Path, ort_library: Path) -> None:
    with pytest.raises(FileNotFoundError, match="ONNX model .*nope.onnx' does not exist.*rlsim export"):
        native.Engine(tmp_path / "nope.onnx", ort_library)


def test_file_that_is_not_onnx(native: Any, tmp_path: Path, ort_library: Path) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"this is not a protobuf")
    with pytest.raises(RuntimeError, match="could not load .*junk.onnx"):
        native.Engine(junk, ort_library)


# --- bad library paths and settings -----------------------------------------------------------
def test_missing_library(native: Any, sum_graph: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="libonnxruntime.so.9' does not exist"):
        native.Engine(sum_graph, tmp_path / "libonnxruntime.so.9")


def engine_error_in_fresh_process(model: Path, library: Path) -> str:
    """``TypeName: message`` of what Engine(model, library) raises in a new interpreter.

    A process loads one ONNX Runtime library for good, so how a *first* load fails is seen only
    in a process that has loaded none yet.
    """
    code = (
        "import sys\n"
        "from rlsim import _native\n"
        "try:\n"
        "    _native.Engine(sys.argv[1], sys.argv[2])\n"
        "except Exception as e:\n"
        "    print(f'{type(e).__name__}: {e}')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(model), str(library)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr  # an exception, not a crash
    return done.stdout.strip()


def test_first_engine_of_a_process_fails_cleanly_on_a_missing_model(
    native: Any, tmp_path: Path, ort_library: Path
) -> None:
    # Before any library is loaded, ONNX Runtime's C++ objects cannot even be destroyed safely:
    # this failure path must not touch them.
    error = engine_error_in_fresh_process(tmp_path / "nope.onnx", ort_library)
    assert re.match(r"FileNotFoundError: ONNX model .*nope.onnx' does not exist", error)


def test_library_that_is_not_a_shared_object(native: Any, sum_graph: Path, tmp_path: Path) -> None:
    fake = tmp_path / "libfake.so"
    fake.write_text("not an ELF file")
    error = engine_error_in_fresh_process(sum_graph, fake)
    assert re.match(r"RuntimeError: cannot load the ONNX Runtime library .*libfake.so: .*libonnxruntime", error)


def test_shared_object_that_is_not_onnx_runtime(native: Any, sum_graph: Path) -> None:
    libm = ctypes.util.find_library("m")  # any real shared library without ONNX Runtime's entry point
    path = next(p for p in (Path("/lib/x86_64-linux-gnu") / str(libm), Path("/usr/lib") / str(libm)) if p.exists())
    error = engine_error_in_fresh_process(sum_graph, path)
    assert re.match(r"RuntimeError: .* has no OrtGetApiBase symbol", error)


def test_second_library_in_one_process_is_refused(
    native: Any, sum_graph: Path, ort_library: Path, tmp_path: Path
) -> None:
    native.Engine(sum_graph, ort_library)  # the first library this process loads
    copy = tmp_path / "libonnxruntime.so.copy"
    shutil.copy(ort_library, copy)
    with pytest.raises(RuntimeError, match="already loaded from .* one library per process"):
        native.Engine(sum_graph, copy)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"optimization": "max"}, "unknown optimization 'max'"),
        ({"execution_mode": "async"}, "unknown execution_mode 'async'"),
        ({"device": "tpu"}, "unknown device 'tpu'"),
        ({"intra_op_threads": -1}, "thread counts must be >= 0"),
    ],
)
def test_bad_settings_raise_value_error(
    native: Any, sum_graph: Path, ort_library: Path, kwargs: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        native.Engine(sum_graph, ort_library, **kwargs)


def test_cuda_without_a_cuda_library_says_so(native: Any, sum_graph: Path, ort_library: Path) -> None:
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider")
    with pytest.raises(RuntimeError, match="needs ONNX Runtime's CUDA provider.*onnxruntime-gpu"):
        native.Engine(sum_graph, ort_library, device="cuda")
