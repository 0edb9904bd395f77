"""``reward`` settings are checked against the runtime and batcher registries when the config loads,
so a typo fails in a second with the valid names, before Ray or vLLM start; plug-in runtimes count
once their module is imported (``reward.imports`` or ``rlsim run --import``)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rlsim.cli.main import main
from rlsim.errors import ConfigError
from rlsim.loop.config import load_run_config
from rlsim.scoring import SCORERS

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = """
from rlsim.scoring.base import register_scorer


@register_scorer("test-plugin-words")
class PluginScorer:
    name = "test-plugin-words"
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An importable user module that registers the runtime ``test-plugin-words``."""
    (tmp_path / "rlsim_test_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    # Each test starts with the plug-in neither imported nor registered, and leaves no trace.
    monkeypatch.setattr(SCORERS, "_items", dict(SCORERS._items))
    monkeypatch.delitem(sys.modules, "rlsim_test_plugin", raising=False)
    yield "rlsim_test_plugin"
    sys.modules.pop("rlsim_test_plugin", None)


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_unknown_batcher_and_runtime_are_refused_listing_the_valid_names(tmp_path: Path) -> None:
    bad = {"reward": {"batcher": "bogus", "runtime": "warp", "server_runtime": "http"}}
    with pytest.raises(ConfigError) as err:
        load_run_config(write(tmp_path, bad))
    text = "\n".join(err.value.errors)
    assert "reward.batcher" in text and "valid names: fixed, sorted, token-budget" in text
    assert "reward.runtime" in text and "eager" in text and "native-int8" in text
    assert "reward.server_runtime" in text and "ort" in text


def test_the_online_dynamic_batcher_is_refused_in_a_loop_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config(write(tmp_path, {"reward": {"batcher": "dynamic"}}))
    assert "dynamic is an online batcher" in "\n".join(err.value.errors)


def test_a_runtime_the_device_cannot_run_is_refused_at_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config(write(tmp_path, {"reward": {"runtime": "eager-fp16"}}))
    assert "runs on cuda only, not cpu" in "\n".join(err.value.errors)
    assert load_run_config(write(tmp_path, {"reward": {"runtime": "eager-fp16", "device": "cuda"}}))


def test_the_cli_refuses_a_bogus_batcher_in_seconds_without_starting_ray() -> None:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "rlsim", "run", str(ROOT / "configs/default.yaml"),
                           "--set", "reward.batcher=bogus", "--out", "/nonexistent/never-written"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 2
    assert "reward.batcher" in proc.stderr and "valid names: fixed, sorted, token-budget" in proc.stderr
    assert time.monotonic() - t0 < 30  # nothing started (Ray and vLLM alone take longer)


def test_a_plugin_runtime_is_accepted_once_its_module_is_imported(tmp_path: Path, plugin: str) -> None:
    with pytest.raises(ConfigError, match="valid names: .*eager.*got 'test-plugin-words'"):
        load_run_config(write(tmp_path, {"reward": {"runtime": "test-plugin-words"}}))
    config = load_run_config(write(tmp_path, {"reward": {"imports": [plugin], "runtime": "test-plugin-words"}}))
    assert config.reward.runtime == "test-plugin-words" and config.reward.imports == [plugin]


def test_run_import_flag_imports_before_validation_and_reaches_the_actors(tmp_path, plugin, monkeypatch) -> None:
    import rlsim.loop.run

    seen = {}

    def fake_run_loop(config, out, **kwargs):  # noqa: ANN001, ANN003 - stands in for the Ray loop
        seen["reward"] = config.reward
        raise KeyboardInterrupt  # stop here: nothing of the real loop runs

    monkeypatch.setattr(rlsim.loop.run, "run_loop", fake_run_loop)
    path = write(tmp_path, {"reward": {"runtime": "test-plugin-words"}})
    assert main(["run", str(path), "--import", plugin, "--out", str(tmp_path / "out")]) == 130
    assert seen["reward"].runtime == "test-plugin-words" and seen["reward"].imports == [plugin]


def test_an_import_that_fails_is_one_clear_error(tmp_path: Path, capsys) -> None:
    path = write(tmp_path, {})
    assert main(["run", str(path), "--import", "no_such_module_for_rlsim_tests"]) == 2
    assert "--import names 'no_such_module_for_rlsim_tests', which cannot be imported" in capsys.readouterr().err
