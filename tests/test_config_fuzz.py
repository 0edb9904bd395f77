"""Config fuzzing (issue 7): any set of broken settings is reported in full, and nothing is launched.

Also (issue 18) the strict YAML loader (alias bombs, duplicate keys) and the text policy every config is
read under (UTF-8 with or without BOM; anything else refused at its first bad byte).

Each example takes configs/default.yaml and breaks k distinct settings (a wrong type, an out-of-range
number or an unknown key); ``load_run_config`` must raise one ConfigError naming every broken
setting. Launching is impossible by construction: the loop only starts after load_run_config
returns, and ray/vllm must not even have been imported by the failed load.
"""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlsim.config_loader import MAX_EXPANDED_NODES, load_yaml, parse_yaml
from rlsim.errors import ConfigError, RlsimError
from rlsim.io import read_user_text
from rlsim.loop.config import load_run_config

DEFAULT = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"

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
        f"import sys; from rlsim.cli.main import main; rc = main(['run', {str(bad)!r}]); "
        "print('LAUNCHED' if ('ray' in sys.modules or 'vllm' in sys.modules) else 'CLEAN'); sys.exit(rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout.strip().endswith("CLEAN")
    assert "steps" in proc.stderr and "reward.replicas" in proc.stderr


# ---- the YAML loader and the text policy every config goes through (issue 18) -----------------------------------


@settings(max_examples=30, deadline=None)
@given(width=st.integers(min_value=2, max_value=40), depth=st.integers(min_value=1, max_value=12))
def test_alias_expansion_is_bounded(width, depth):
    """Accepted exactly when the written-out document has at most MAX_EXPANDED_NODES values."""
    rows = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    rows += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth)]
    # Level i written out: width**(i+1) leaves plus the lists above them; plus the top mapping and its keys.
    levels = [sum(width**k for k in range(1, i + 2)) + 1 for i in range(depth)]
    expanded = 1 + depth + sum(levels)
    if expanded <= MAX_EXPANDED_NODES:
        assert len(parse_yaml("\n".join(rows), "doc")) == depth
    else:
        with pytest.raises(RlsimError, match="alias bomb"):
            parse_yaml("\n".join(rows), "doc")


def test_duplicate_keys_are_refused_with_both_lines():
    with pytest.raises(RlsimError, match=r"doc: line 4, column 3: duplicate key 'batch_size' \(first at line 2\)"):
        parse_yaml("reward:\n  batch_size: 8\n  replicas: 1\n  batch_size: 16\n", "doc")


def test_anchors_merges_and_a_cycle():
    merged = parse_yaml("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n", "doc")
    assert merged["d"] == {"x": 1, "y": 3}  # a merge may repeat a key: that is what it is for
    with pytest.raises(RlsimError, match="cycle"):
        parse_yaml("a: &a [1, *a]\n", "doc")


def test_yaml_syntax_error_is_one_line_with_its_place():
    with pytest.raises(RlsimError) as err:
        parse_yaml("a: [1, 2\nb: 3\n", "doc")
    assert "\n" not in str(err.value) and str(err.value).startswith("doc: line ")


def test_utf8_bom_is_dropped_and_line_ends_kept(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xef\xbb\xbfsteps: 3\r\nname: caf\xc3\xa9\r\n")
    assert read_user_text(path) == "steps: 3\r\nname: café\r\n"
    assert load_yaml(path) == {"steps": 3, "name": "café"}


@pytest.mark.parametrize(
    "data,expected",
    [
        (b"ab\ncd\xffe", "line 2, byte offset 2 (byte 5 of the file)"),
        (b"\xef\xbb\xbfa\x00", "line 1, byte offset 4 (byte 4 of the file) is a NUL"),  # offsets count the BOM
        (b"ok\n\x00\xff", "line 2, byte offset 0 (byte 3 of the file) is a NUL"),  # the first problem wins
        (b"\xfe\xff\x00a", "is UTF-16"),
    ],
)
def test_refusals_name_the_first_bad_byte(tmp_path, data, expected):
    path = tmp_path / "f.txt"
    path.write_bytes(data)
    with pytest.raises(RlsimError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        read_user_text(path, "text file")
