"""Bad logs (issue 27's cases, on the project's own ``data/verl_metrics.jsonl``): exit 2 and one line that
names the file, the line, the key and the fix; never a traceback, never a silently wrong profile."""

from __future__ import annotations

import json
import resource
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlsim.cli.main import main
from tests.helpers import log_cases

VERL = Path(__file__).resolve().parent / "data" / "verl_metrics.jsonl"


def _edited(tmp_path: Path, key: str, raw: str, line: int = 3) -> Path:
    """``verl_metrics.jsonl`` with ``key`` of line ``line`` set to the JSON text ``raw``."""
    lines = VERL.read_text().splitlines()
    lines[line - 1] = lines[line - 1].replace(f'"{key}": ', f'"{key}": {raw}, "_was": ', 1)
    path = tmp_path / "verl.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(tmp_path: Path, log: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    out = tmp_path / "p.json"
    rc = main(["profile", "--from-log", str(log), "--out", str(out), "--summary", str(tmp_path / "s.json")])
    err = capsys.readouterr().err
    assert (rc == 0) == out.exists()
    return rc, err


@pytest.mark.parametrize(
    ("key", "raw", "says"),
    [
        ("perf/total_num_tokens", "1e12", "is 1e+12, outside 1..1e+11 tokens"),  # was: 3.7e9 rollouts, ~20 GB
        ("perf/total_num_tokens", "1e10", "rollouts, beyond 1048576"),
        ("timing_s/gen", "NaN", "timing_s/gen is nan"),
        ("timing_s/update_actor", "Infinity", "timing_s/update_actor is inf"),
        ("perf/total_num_tokens", "NaN", "perf/total_num_tokens is nan"),
        ("response_length/mean", "Infinity", "response_length/mean is inf"),
        ("response_length/max", "NaN", "response_length/max is nan"),
        ("prompt_length/mean", "-5", "prompt_length/mean is negative (-5)"),
        ("timing_s/update_weights", "-1.5", "timing_s/update_weights is negative (-1.5)"),
        ("timing_s/reward", "-2", "timing_s/reward is negative (-2)"),
        ("timing_s/step", "NaN", "timing_s/step is nan"),
        ("timing_s/step", "5.0", "timing_s/step 5 s is less than the phases it holds"),
        ("perf/total_num_tokens", "0", "perf/total_num_tokens is 0, outside 1..1e+11 tokens"),
        ("perf/total_num_tokens", "-5", "perf/total_num_tokens is negative (-5)"),
        ("timing_s/gen", "null", "timing_s/gen is null"),
        ("timing_s/gen", "-3", "timing_s/gen is negative (-3)"),
        ("perf/total_num_tokens", "1" + "0" * 400, "perf/total_num_tokens is inf"),  # beyond a float
    ],
)
def test_each_bad_value_is_one_line_naming_file_line_key_and_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, raw: str, says: str
) -> None:
    log = _edited(tmp_path, key, raw)
    rc, err = _run(tmp_path, log, capsys)
    assert rc == 2 and err.count("\n") == 1, err
    assert f"{log} line 3: " in err and says in err and "fix or delete that line" in err, err


def test_the_huge_token_count_is_refused_before_any_allocation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rc, _ = _run(tmp_path, _edited(tmp_path, "perf/total_num_tokens", "1e12"), capsys)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert rc == 2 and grown_mb < 100


def test_gpus_given_against_the_log_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["profile", "--from-log", str(VERL), "--gpus", "16", "--out", str(tmp_path / "p.json")])
    assert rc == 2 and "perf/throughput says the run had 8 GPUs: give --gpus 8" in capsys.readouterr().err


_BAD = st.one_of(
    st.sampled_from(["NaN", "Infinity", "-Infinity", "null", "-1", "0", "1e300", "1e12", '"x"', "[1]", "true", "{}"]),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda v: json.dumps(v)),
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True)
@given(
    edits=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 40), _BAD), max_size=4),
    console=st.booleans(),
    cut=st.one_of(st.none(), st.integers(0, 2000)),
)
def test_any_mangled_log_exits_0_or_2_never_a_traceback(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edits: list[tuple[int, int, str]],
    console: bool,
    cut: int | None,
) -> None:
    steps = log_cases.verl_steps(5, seed=4)
    lines = log_cases.verl_file_logger(steps)
    for row, col, raw in edits:
        obj = json.loads(lines[row])
        key = sorted(obj["data"])[col % len(obj["data"])]
        lines[row] = json.dumps(obj).replace(f'"{key}": ', f'"{key}": {raw}, "_was": ', 1)
    if console:  # the same values printed by verl's console logger instead
        records = [json.loads(x, parse_constant=float)["data"] for x in lines]
        lines = [
            "step:" + str(i) + "".join(f" - {k}:{v}" for k, v in d.items()) for i, d in enumerate(records, start=1)
        ]
    if cut is not None:
        lines[-1] = lines[-1][:cut]
    log = tmp_path / ("run.log" if console else "run.jsonl")
    log.write_text("\n".join(lines) + "\n")
    summary = tmp_path / "s.json"
    summary.unlink(missing_ok=True)
    rc = main(["profile", "--from-log", str(log), "--out", str(tmp_path / "p.json"), "--summary", str(summary)])
    err = capsys.readouterr().err
    assert rc in (0, 2), err
    if rc == 2:
        assert err.startswith("rlsim profile: error: ") and "Traceback" not in err
    else:
        json.loads(summary.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in --summary"))
