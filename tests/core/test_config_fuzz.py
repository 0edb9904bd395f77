"""Config fuzzing (issue 7): any set of broken settings is reported in full, and nothing is launched.

Each example takes configs/default.yaml and breaks k distinct settings (a wrong type, an out-of-range
number or an unknown key); ``load_run_config`` must raise one ConfigError naming every broken
setting. Launching is impossible by construction: the loop only starts after load_run_config
returns, and ray/vllm must not even have been imported by the failed load.
"""

import subprocess
import sys
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlsim.errors import ConfigError
from rlsim.loop.config import load_run_config

DEFAULT = Path(__file__).resolve().parents[2] / "configs" / "default.yaml"

# (dotted key, bad value, text the error must contain)
BREAKAGES = [
    ("steps", "many", "steps"),
    ("steps", -3, "steps"),
    ("workload.prompts_per_step", 0, "workload.prompts_per_step"),
    ("workload.group_size", 1, "workload.group_size"),
    ("reward.replicas", "two", "reward.replicas"),
    ("reward.batch_size", 0, "reward.batch_size"),
    ("policy.kv_cache_gib", -1, "policy.kv_cache_gib"),
    ("policy.backend", "tensorrt", "policy.backend"),
    ("trainer.clip_eps", "wide", "trainer.clip_eps"),
    ("reward.colour", "red", "reward.colour"),
    ("placement.nonsense", 1, "placement.nonsense"),
    ("schedule", "whenever", "schedule"),
]


def _set(data: dict, dotted: str, value: object) -> None:
    *parents, leaf = dotted.split(".")
    for p in parents:
        data = data.setdefault(p, {})
    data[leaf] = value


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.sampled_from(BREAKAGES), min_size=1, max_size=5, unique_by=lambda b: b[0]))
def test_every_broken_setting_is_reported_at_once(tmp_path, picks):
    data = yaml.safe_load(DEFAULT.read_text())
    for key, value, _ in picks:
        _set(data, key, value)
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        load_run_config(path)
    except ConfigError as err:
        text = str(err)
        missing = [needle for _, _, needle in picks if needle not in text]
        assert not missing, f"errors not reported: {missing}\n{text}"
        assert len(err.errors) >= len(picks)
    else:
        raise AssertionError(f"config with {picks} was accepted")


def test_invalid_config_launches_nothing(tmp_path):
    """The CLI exits 2 listing the errors, before importing Ray or vLLM (so nothing could have started)."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: zero\nreward: {replicas: 0}\n")
    code = (
        "import sys; from rlsim.cli.main import main; rc = main(['run', %r]); "
        "print('LAUNCHED' if ('ray' in sys.modules or 'vllm' in sys.modules) else 'CLEAN'); sys.exit(rc)" % str(bad)
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout.strip().endswith("CLEAN")
    assert "steps" in proc.stderr and "reward.replicas" in proc.stderr
