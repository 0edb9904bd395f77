"""The async contention experiment end to end on Ray + vLLM: ``configs/contention_async.yaml --quick``
through the CLI's entry point in this process, on the suite's shared Ray cluster
(tests/helpers/contention_cli.py), shrunk to two runtimes (eager, ort), two repeats in one Ray session, 3 updates
per async together run and a tiny batch. vLLM is needed here: async trains with its behaviour log-probs.
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from tests.helpers.contention_cli import CONFIGS, TINY, run_cli

pytestmark = pytest.mark.slow
UPDATES = 3


@pytest.fixture(scope="module")
def results(ray_cluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    pytest.importorskip("ray")
    pytest.importorskip("vllm")
    pytest.importorskip("onnxruntime")
    out = tmp_path_factory.mktemp("contention-async") / "out"
    # The engine inside the rollout actor (two interpreters fewer to start); the pool accounting then finds
    # generation's CPU time in the rollout actor's own process.
    overrides = TINY + [f"contention.async_updates={UPDATES}", "loop.policy.engine_process=inline"]
    saved, summary = run_cli(
        CONFIGS / "contention_async.yaml", out, "--quick", "--runtimes", "eager,ort", overrides=overrides
    )
    assert summary["complete"] and summary["repeats_done"] == 2
    assert isinstance(summary["async_freed_went_to"]["ort"], list)  # the last stdout line says it too
    return out, saved


def test_each_together_run_is_a_whole_async_pipeline(results) -> None:
    _, saved = results
    assert saved["complete"] and saved["schedule"] == "async" and saved["async_updates"] == UPDATES
    conditions = {m["condition"] for m in saved["measurements"]}
    assert conditions == {"gen_alone", "score_alone", "together"}  # no time-boxed condition under async
    assert len(saved["measurements"]) == 2 * 2 * 3
    for m in (m for m in saved["measurements"] if m["condition"] == "together"):
        f = m["figures"]
        assert m["updates"] == UPDATES and f["rollouts"] == UPDATES * 4  # 2 prompts x 2 samples per update
        assert 0 <= f["mean_staleness"] <= 1 and 0 <= f["trainer_idle_fraction"] < 1
        assert f["rollouts_trained_per_hour"] == pytest.approx(UPDATES * 4 / f["wall_s"] * 3600, rel=1e-3)
        assert f["step_s"] == pytest.approx(f["wall_s"] / UPDATES) and f["score_core_s"] > 0
        assert m["sync"] == "vllm-reload"  # loop.trainer.sync: reload, the weights really reach vLLM


def test_outcomes_per_runtime_with_cis_and_words(results) -> None:
    out, saved = results
    for name in ("eager", "ort"):
        a = saved["runtimes"][name]["async"]
        for key in ("rollouts_trained_per_hour", "mean_staleness", "trainer_idle_fraction"):
            assert a[key]["n"] == 2 and a[key]["mean"] is not None, (name, key)
    ort = saved["runtimes"]["ort"]["async"]
    assert ort["rollouts_trained_per_hour_change"]["n"] == 2 and isinstance(ort["freed_went_to"], list)
    assert any(c.startswith("Async, **ort** vs eager") for c in saved["conclusions"])
    assert "## Async pipeline per runtime" in (out / "report.md").read_text()


def test_nothing_is_left_running(results) -> None:
    _, saved = results
    pids = [p for s in saved["sessions"] for p in s["pids"].values()]
    deadline = time.time() + 30  # Ray reaps killed actors asynchronously
    while time.time() < deadline and any(psutil.pid_exists(p) for p in pids):
        time.sleep(0.5)
    assert pids and not any(psutil.pid_exists(p) for p in pids)
