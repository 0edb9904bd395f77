"""``rlsim bench scoring`` end to end: real worker processes, real batchers, a test-only runtime.

The runtime is ``fake-words`` (tests/helpers/bench_fake_runtime.py), whose reward is a known function of
the text, so the run can be checked exactly: every cell must return every text's own reward.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rlsim.batching import make_batcher, plan_stats
from rlsim.cli.main import main
from rlsim.workloads import WorkloadSpec, build_workload

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def fake_runtime(monkeypatch: pytest.MonkeyPatch):
    from tests.helpers import bench_fake_runtime as fake_runtime  # registers "fake-words" in this process

    # Worker processes import it too: through RLSIM_PLUGINS, found from the repository root on PYTHONPATH.
    monkeypatch.setenv("RLSIM_PLUGINS", "tests.helpers.bench_fake_runtime")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return fake_runtime


@pytest.mark.slow  # the real benchmark: a GEMM process before and after, a fresh process per cell and repeat
def test_quick_style_run_writes_every_output(tmp_path: Path, capsys, fake_runtime) -> None:
    out = tmp_path / "bench"
    argv = ["bench", "scoring", "--runtimes", "fake-words", "--batch-sizes", "4", "--budgets", "600",
            "--repeats", "2", "--warmup", "1", "--count", "10", "--seed", "3",
            "--set", "workload.prompt.tokens=5", "--set", "workload.response.mean=60",
            "--baseline", "fake-words/fixed/4", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    labels = [c["cell"] for c in result["cells"]]
    assert labels == ["fake-words/fixed/4", "fake-words/sorted/4", "fake-words/token-budget/600"]
    assert result["gemm_gflops"] > 0 and len(result["gemm_gflops_runs"]) == 2
    assert [c["cell"] for c in result["comparisons"]] == labels[1:]
    for name in ("results.json", "cells.csv", "samples.csv", "summary.md", "raw_samples.json", "throughput.png",
                 "throughput_vs_batch.png", "padding_waste.png"):  # fmt: skip
        assert (out / name).stat().st_size > 0, name
    assert json.loads((out / "results.json").read_text()) == result

    spec = WorkloadSpec.model_validate(
        {k: result["workload"][k] for k in ("count", "seed", "prompt", "response", "path")}
    )
    texts = build_workload(spec).texts
    lengths = [len(t.split()) + 2 for t in texts]
    raw = json.loads((out / "raw_samples.json").read_text())["cells"]
    for cell in result["cells"]:
        # Each repeat, in its own process, gave every text its own reward, in the caller's order.
        for repeat in raw[cell["cell"]]:
            assert repeat["rewards"] == pytest.approx([fake_runtime.reward_of(t) for t in texts])
        # Padding waste in the JSON is the plan's, recomputed here from the word counts.
        batcher = make_batcher(cell["batcher"], size=cell["batch_size"], budget=cell["token_budget"])
        assert cell["padding_waste"] == pytest.approx(plan_stats(batcher.plan(lengths), lengths).padding_waste)
        assert cell["repeats"] == 2 and cell["reward_max_abs_diff"] == 0.0
        # Fidelity on the corpus against fp32 eager: word counts are no reward model, and fake-words claims fp32,
        # so it flips some pairs and fails the fp32 rule.
        assert 0 < cell["pair_flip_rate"] < 1 and cell["fidelity_ok"] is False
    assert result["fidelity"]["fake-words"]["pair_flip_rate"] == result["cells"][0]["pair_flip_rate"]


def test_worker_failure_is_reported_with_its_message(tmp_path: Path, capsys, fake_runtime, monkeypatch) -> None:
    # A plugin that registers the runtime in this process but not in the workers: the first worker fails.
    monkeypatch.setenv("RLSIM_PLUGINS", "")
    argv = ["bench", "scoring", "--runtimes", "fake-words", "--batchers", "fixed", "--batch-sizes", "4",
            "--repeats", "2", "--count", "4", "--baseline", "fake-words/fixed/4", "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 2
    assert "cell fake-words/fixed/4 failed: unknown scoring runtime 'fake-words'" in capsys.readouterr().err
