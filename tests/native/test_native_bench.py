"""The standalone C++ benchmark runs the same engine without Python and prints one JSON line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlsim.scoring.ort_library import native_bench_path

pytestmark = pytest.mark.native


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(native_bench_path()), *args], capture_output=True, text=True, timeout=300)


def test_bench_prints_one_json_line_with_the_timings(native: Any, tiny_bert: Path, ort_library: Path) -> None:
    done = bench(
        "--model",
        str(tiny_bert),
        "--ort-library",
        str(ort_library),
        "--batch",
        "4",
        "--seq",
        "16",
        "--warmup",
        "1",
        "--iterations",
        "5",
        "--threads",
        "1",
        "--spinning",
        "0",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["batch"] == 4 and result["seq"] == 16 and result["iterations"] == 5
    assert result["threads"] == 1 and result["spinning"] is False and result["ort_version"]
    assert result["seq_per_s"] > 0 and result["load_s"] > 0
    assert 0 < result["min_latency_ms"] <= result["p50_latency_ms"] <= result["max_latency_ms"]
    # seq/s is the batch over the mean latency.
    assert result["seq_per_s"] == pytest.approx(4 * 1000 / result["mean_latency_ms"], rel=1e-4)


def test_bench_scores_what_python_scores(native: Any, tiny_bert: Path, ort_library: Path) -> None:
    # --vocab 2 makes every synthetic id 1 (ids are drawn from [1, vocab - 1]), so Python can
    # rebuild the exact batch and check the reward the benchmark printed.
    done = bench(
        "--model",
        str(tiny_bert),
        "--ort-library",
        str(ort_library),
        "--batch",
        "3",
        "--seq",
        "9",
        "--warmup",
        "0",
        "--iterations",
        "1",
        "--vocab",
        "2",
        "--threads",
        "1",
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout.strip().splitlines()[-1])["first_reward"]
    ids = np.ones((3, 9), dtype=np.int64)
    expected = native.Engine(tiny_bert, ort_library, intra_op_threads=1).run(ids, ids)[0]
    assert printed == pytest.approx(float(expected), abs=1e-6)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "--model and --ort-library are required"),
        (("--model", "m.onnx", "--ort-library", "x", "--batch", "0"), "--batch needs an integer >= 1, got '0'"),
        (("--model", "m.onnx", "--ort-library", "x", "--threads", "two"), "--threads needs an integer"),
        (("--model", "m.onnx", "--ort-library", "x", "--color", "red"), "unknown flag --color"),
        (("--model", "missing.onnx", "--ort-library", "x"), "ONNX model 'missing.onnx' does not exist"),
    ],
)
def test_bench_bad_arguments_exit_2_with_a_message(native: Any, args: tuple, message: str) -> None:
    done = bench(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stdout == ""


def test_bench_help(native: Any) -> None:
    done = bench("--help")
    assert done.returncode == 0 and "usage: rlsim_native_bench" in done.stdout
