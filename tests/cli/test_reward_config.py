"""``--reward-config``: ``rlsim score`` and ``rlsim bench scoring`` run rewards that are no model with the settings
given (not only the defaults), refuse a bad or unused section before anything starts, and the benchmark neither
judges them against the reward model nor gives them a fraction of a GEMM peak."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from rlsim.cli.main import main

FNS = "tests.helpers.reward_fns"  # importable in the worker processes: the repo root is on sys.path


def _write(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_score_runs_the_function_the_reward_config_names(tmp_path: Path) -> None:
    """The default function is the math checker (0 for these texts); the section's target scores lengths."""
    texts = tmp_path / "texts.txt"
    texts.write_text("ab\nabcde\n")
    config = _write(tmp_path / "reward.yaml", {"function": {"target": f"{FNS}:length", "workers": 1}})
    out = tmp_path / "out.jsonl"
    args = ["score", "--runtime", "function", "--input", str(texts), "--output", str(out)]
    assert main([*args, "--reward-config", str(config)]) == 0
    assert [json.loads(line)["reward"] for line in out.read_text().splitlines()] == [2.0, 5.0]
    assert main(args) == 0
    assert [json.loads(line)["reward"] for line in out.read_text().splitlines()] == [0.0, 0.0]


def test_score_takes_the_section_from_a_run_config(tmp_path: Path) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("abc\n")
    run_config = {"reward": {"runtime": "function", "function": {"target": f"{FNS}:length", "workers": 1}}}
    config = _write(tmp_path / "run.yaml", run_config)
    out = tmp_path / "out.jsonl"
    args = ["score", "--runtime", "function", "--input", str(texts), "--output", str(out)]
    assert main([*args, "--reward-config", str(config)]) == 0
    assert json.loads(out.read_text())["reward"] == 3.0


@pytest.mark.parametrize(
    "runtime, section, message",
    [
        ("function", {"sandbox": {"wall_s": 2}}, "has no function section \\(it has: sandbox\\)"),
        ("function", {"function": {"target": "no_such_module:f"}}, "reward.function.target"),
        ("function", {"function": {"workers": 0}}, "reward.function.workers"),
        ("genrm", {"genrm": {"template": "no placeholder"}}, "reward.genrm.template"),
        ("function", {"judge": {}}, "reward.judge: not a reward section"),
    ],
)
def test_score_refuses_a_bad_reward_config_before_anything_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], runtime: str, section: dict, message: str
) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("abc\n")
    config = _write(tmp_path / "reward.yaml", section)
    out = tmp_path / "out.jsonl"
    code = main(
        ["score", "--runtime", runtime, "--input", str(texts), "--output", str(out), "--reward-config", str(config)]
    )
    assert code == 2
    assert re.search(message, capsys.readouterr().err)
    assert not out.exists()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--runtimes", "function"], "reward sections \\['sandbox'\\] apply to runtimes this benchmark does not run"),
        (["--runtimes", "function,sandbox", "--batchers", "token-budget", "--budgets", "1000"], "count a text's char"),
    ],
)
def test_bench_refuses_an_unused_section_and_a_budget_below_one_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    config = _write(tmp_path / "reward.yaml", {"function": {"workers": 1}, "sandbox": {"workers": 1}})
    out = tmp_path / "out"
    code = main(["bench", "scoring", "--count", "4", "--out", str(out), "--reward-config", str(config), *flags])
    assert code == 2
    assert re.search(message, capsys.readouterr().err)
    assert not out.exists()


@pytest.mark.slow  # the real benchmark: a GEMM process before and after, a fresh process per repeat
def test_bench_runs_a_function_with_its_section_and_judges_no_fidelity(tmp_path: Path) -> None:
    config = _write(tmp_path / "reward.yaml", {"function": {"target": f"{FNS}:length", "workers": 1}})
    out = tmp_path / "out"
    args = ["bench", "scoring", "--runtimes", "function", "--batchers", "fixed", "--batch-sizes", "4",
            "--count", "8", "--repeats", "2", "--baseline", "function/fixed/4", "--out", str(out),
            "--reward-config", str(config)]  # fmt: skip
    assert main(args) == 0
    result = json.loads((out / "results.json").read_text())
    assert result["reward"] == {"function": {"target": f"{FNS}:length", "workers": 1}}
    assert "no model" in result["fidelity"]["function"]["skipped"]
    cell = result["cells"][0]
    assert (cell["gemm_fraction"], cell["peak_fraction"], cell["fidelity_ok"]) == (None, None, None)
    # The texts' lengths: the section's function ran, not the math checker (0 for filler text).
    rewards = json.loads((out / "raw_samples.json").read_text())["cells"]["function/fixed/4"][0]["rewards"]
    assert len(rewards) == 8 and all(r > 100 for r in rewards)
