"""The PPO contention experiment end to end: ``configs/contention_ppo.yaml --quick`` through the CLI's entry point
in this process, on the suite's shared Ray cluster (tests/helpers/contention_cli.py), shrunk to two runtimes
(eager, ort), two repeats in one Ray session and a tiny step.

Rollout, scorers, reference, critic and trainer run as Ray actors on the shared pool. The generator is
Hugging Face ``generate`` (``loop.policy.backend=hf``), as in test_contention_e2e.py and for the same
reason: vLLM's engine start would dominate, and the experiment reaches the generator only through the
loop's backend, which the loop's own tests run on vLLM (the async contention test runs it here too).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.contention_cli import CONFIGS, TINY, run_cli

pytestmark = pytest.mark.slow
ROLES = ("rollout", "scorer", "reference", "critic", "trainer")


@pytest.fixture(scope="module")
def results(ray_cluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    pytest.importorskip("ray")
    pytest.importorskip("onnxruntime")
    out = tmp_path_factory.mktemp("contention-ppo") / "out"
    overrides = TINY + ["loop.policy.backend=hf", "contention.quick.budget_s=2", "contention.timebox.micro_batch=2"]
    saved, summary = run_cli(
        CONFIGS / "contention_ppo.yaml", out, "--quick", "--runtimes", "eager,ort", overrides=overrides
    )
    assert summary["complete"] and summary["repeats_done"] == 2
    assert set(summary["roles_destination"]) == {"ort"}  # the last stdout line names where it went
    return out, saved


def test_every_role_ran_in_every_together_step_and_was_accounted(results) -> None:
    _, saved = results
    assert saved["complete"] and saved["algorithm"] == "ppo"
    seen = {(m["runtime"], m["repeat"], m["condition"]) for m in saved["measurements"]}
    assert len(seen) == len(saved["measurements"]) == 2 * 2 * 4  # runtimes x repeats x conditions
    together = [m for m in saved["measurements"] if m["condition"] == "together"]
    for m in together:
        f, core = m["figures"], m["pool"]["core_s"]
        assert f["rollouts"] == 4 and f["reference_s"] > 0 and f["values_s"] > 0 and f["update_critic_s"] > 0
        for group in ("generate", "score", "reference", "critic", "update"):
            assert core[group] > 0, group
        assert f["critic_core_s"] == pytest.approx(core["critic"], abs=1e-4)


def test_core_seconds_per_role_and_where_the_freed_capacity_went(results) -> None:
    out, saved = results
    for name in ("eager", "ort"):
        roles = saved["runtimes"][name]["roles"]
        for role in ROLES:
            e = roles["core_s_per_step"][role]
            assert e["mean"] > 0 and e["n"] == 2 and e["ci_low"] is not None, (name, role)
    went = saved["runtimes"]["ort"]["roles"]["freed_went_to"]
    assert set(went) == {"rollout", "reference", "critic", "trainer", "idle", "shorter_step", "rest"}
    assert all(e["n"] == 2 for e in went.values())
    assert any(c.startswith("PPO roles, **ort** vs eager") for c in saved["conclusions"])
    report = (out / "report.md").read_text()
    assert "## PPO roles: core-seconds per together step" in report
    assert (out / "pool_time.png").stat().st_size > 1000
