"""``rlsim plan`` end to end on small clusters, and one clear message per kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rlsim.cli.main import main
from rlsim.planner.profile.schema import save_profile
from tests.helpers.planner_cases import make_profile

ROOT = Path(__file__).resolve().parents[2]
CPU_CONFIG = ROOT / "configs" / "cluster_cpu_small.yaml"


def test_plan_writes_ranked_json_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            ["plan", str(CPU_CONFIG), "--out", str(tmp_path), "--set", "search.steps=2", "--set", "simulation.steps=3"]
        )
        == 0
    )
    doc = json.loads((tmp_path / "plan.json").read_text())
    ranked = doc["ranked"]
    assert len(ranked) == doc["search"]["placements"] > 10
    rates = [r["rollouts_per_hour"] for r in ranked]
    assert rates == sorted(rates, reverse=True)
    chosen = doc["chosen"]
    assert chosen["label"] == ranked[0]["label"] and len(chosen["step_totals_s"]) == 3
    assert set(chosen["time_s"]) == {"generate", "score", "score_tail", "update", "sync", "idle", "total"}
    assert chosen["bottleneck"]["name"] in {"generation", "scoring", "update", "sync", "overhead"}
    assert doc["profile"]["illustrative"] and "ILLUSTRATIVE" in doc["warnings"][0]
    for png in ("step_time_vs_scoring_share.png", "plan_utilisation.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    assert "chosen plan" in capsys.readouterr().out


def test_target_picks_the_fewest_nodes_that_meet_it(tmp_path: Path) -> None:
    # 4 nodes of 2 cores; 64 rollouts. Fewer nodes are slower; the target must pick the smallest
    # node count whose simulated step meets it.
    config = _small_config(tmp_path, nodes=4)
    config["search"]["nodes"] = [1, 2, 4]
    path = _write(tmp_path, config)
    assert main(["plan", str(path), "--json", str(tmp_path / "p.json")]) == 0
    by_nodes = {
        r["placement"]["nodes"]: r["step_time_s"] for r in json.loads((tmp_path / "p.json").read_text())["ranked"]
    }
    target = (by_nodes[2] + by_nodes[4]) / 2  # 4 nodes meet it, 2 do not
    assert by_nodes[1] > by_nodes[2] > by_nodes[4]
    assert main(["plan", str(path), "--target-step-s", str(target), "--json", str(tmp_path / "t.json")]) == 0
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["objective"] == "fewest_resources" and doc["meets_target"] is True
    assert doc["chosen"]["placement"]["nodes"] == 4
    config["search"]["nodes"] = [1, 2]
    assert (
        main(
            [
                "plan",
                str(_write(tmp_path, config)),
                "--target-step-s",
                str(target),
                "--json",
                str(tmp_path / "miss.json"),
            ]
        )
        == 0
    )
    missed = json.loads((tmp_path / "miss.json").read_text())
    assert missed["meets_target"] is False and any("no placement meets" in w for w in missed["warnings"])


def _small_config(tmp_path: Path, nodes: int = 1, gpus: int = 0, runtime: str = "const") -> dict:
    save_profile(make_profile(per_seq_s=0.001), tmp_path / "profile.json")
    return {
        "name": "t",
        "nodes": {"count": nodes, "cores": 2, "gpus": gpus, "kind": "test-kind"},
        "profiles": {"test-kind": "profile.json"},
        "workload": {"prompts_per_step": 16, "group_size": 4, "response_tokens": {"kind": "lognormal", "mean": 50}},
        "search": {
            "runtimes": [runtime],
            "batchers": [{"kind": "fixed", "batch_size": 8}],
            "colocated": [True],
            "steps": 2,
        },
        "simulation": {"steps": 2},
    }


def _write(tmp_path: Path, config: dict) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _error_of(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_profile_from_another_release_plans_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _small_config(tmp_path))
    data = json.loads((tmp_path / "profile.json").read_text())
    data["rlsim_version"] = "9.9.9"
    (tmp_path / "profile.json").write_text(json.dumps(data))
    assert main(["plan", str(path)]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if " was written by " in line]
    assert len(notes) == 1 and "was written by rlsim 9.9.9" in notes[0]
    data["schema_version"] = 0
    (tmp_path / "profile.json").write_text(json.dumps(data))
    assert "has schema version 0 but this rlsim reads version 1" in _error_of(path, capsys)


def test_missing_runtime(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _error_of(_write(tmp_path, _small_config(tmp_path, runtime="native")), capsys)
    assert "no latency model for runtime 'native'" in err


def test_cuda_runtime_on_a_cluster_without_gpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _small_config(tmp_path)
    profile = make_profile(device="cuda")
    save_profile(profile, tmp_path / "profile.json")
    assert "nodes have no GPUs" in _error_of(_write(tmp_path, config), capsys)


def test_impossible_given_placement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _small_config(tmp_path)
    config["placement"] = {
        "runtime": "const",
        "batcher": {"kind": "fixed", "batch_size": 4},
        "replicas_per_node": 4,
        "scoring_share": 0.5,
    }
    assert "less than one core" in _error_of(_write(tmp_path, config), capsys)


def test_every_config_error_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _small_config(tmp_path)
    config["workload"]["group_size"] = 0
    config["nodes"]["kind"] = "other"
    config["search"]["batchers"] = [{"kind": "token-budget"}]
    err = _error_of(_write(tmp_path, config), capsys)
    assert "group_size" in err and "token_budget" in err


def test_h100_example_separates_sourced_from_assumed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The GPU-cluster example runs from the sourced profile and says what is published and what is assumed."""
    config = Path(__file__).resolve().parents[2] / "configs" / "cluster_h100_example.yaml"
    out = tmp_path / "plan.json"
    assert (
        main(
            [
                "plan",
                str(config),
                "--json",
                str(out),
                "--set",
                "search.nodes=[2]",
                "--set",
                "search.steps=1",
                "--set",
                "simulation.steps=1",
            ]
        )
        == 0
    )
    doc = json.loads(out.read_text())
    provenance = doc["profile"]["provenance"]
    assert provenance["sourced"] and provenance["assumed"] and "trainer.sync_fixed_s" in provenance["assumed"]
    assert not any("other hardware" in w for w in doc["warnings"])  # H100 profile, H100 cluster
    labels = {e["label"] for e in doc["ranked"]}
    assert any("tp2" in label for label in labels) and any("math-verify" in label for label in labels)
    assert "sourced vs assumed" in capsys.readouterr().out
