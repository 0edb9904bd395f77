"""Every command meets bad input with one clear line and exit status 2 (issue 18).

Property-based: for each subcommand that reads a user file, hypothesis writes a broken file into that
slot (random bytes, UTF-16/32, Latin-1, NUL bytes; for YAML also alias bombs and duplicate keys) and
the command must refuse it naming the file, before any model or Ray starts, leaving its outputs as they
were. Every numeric flag of every subcommand gets out-of-range values. The fixed cases of the issue
follow in tests/cli/test_cli_bad_input_cases.py. All run in-process (``rlsim.cli.main.main``), so an
example costs milliseconds; the whole module stays well under a minute.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rlsim.cli.main import build_parser
from tests.helpers.bad_input import broken_text, broken_yaml, keep, refuse

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
FUZZ = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
# deadline=None: the first example of a slot pays one-off imports (torch, transformers); HANG_BOUND_S in
# bad_input.refuse bounds every example instead.

# A slot: (file suffix or name, content strategy, builder(tmp, bad_file) -> (argv, outputs that must stay intact)).
Slot = tuple[str, Callable[[], st.SearchStrategy[bytes]], Callable[[Path, Path], tuple[list[object], list[Path]]]]


def _score(tmp: Path, bad: Path):
    out = keep(tmp / "scores.jsonl")
    return ["score", "--input", bad, "--output", out], [out]


def _run(tmp: Path, bad: Path):
    out = keep(tmp / "run" / "results.json")
    return ["run", bad, "--out", out.parent], [out]


def _contention(tmp: Path, bad: Path):
    out = keep(tmp / "exp" / "results.json")
    return ["experiment", "contention", bad, "--out", out.parent], [out]


def _bench_config(tmp: Path, bad: Path):
    out = keep(tmp / "bench" / "results.json")
    return ["bench", "scoring", "--config", bad, "--out", out.parent], [out]


def _bench_workload(tmp: Path, bad: Path):
    out = keep(tmp / "bench" / "results.json")
    return ["bench", "scoring", "--workload-file", bad, "--out", out.parent], [out]


def _run_workload(tmp: Path, bad: Path):
    """The loop's prompts file is read by the rollout actor; it must be refused before Ray starts."""
    cfg = tmp / "run.yaml"
    cfg.write_text((CONFIGS / "default.yaml").read_text().replace("    seed: 0\n", f"    seed: 0\n    path: {bad}\n"))
    out = keep(tmp / "run" / "results.json")
    return ["run", cfg, "--out", out.parent], [out]


def _profile(tmp: Path, bad: Path):
    out = keep(tmp / "profile.json")
    return ["profile", bad, "--out", out], [out]


def _profile_fill_from(tmp: Path, bad: Path):
    out = keep(tmp / "profile.json")
    cfg = CONFIGS / "profiles" / "measure_cpu_2core.yaml"
    return ["profile", cfg, "--out", out, "--fill-from", bad], [out]


def _plan(tmp: Path, bad: Path):
    out = keep(tmp / "plan.json")
    return ["plan", bad, "--json", out], [out]


def _plan_profile(tmp: Path, bad: Path):
    """A valid cluster YAML whose profile file is broken."""
    cfg = tmp / "cluster.yaml"
    text = (CONFIGS / "cluster_example.yaml").read_text()
    cfg.write_text(text.replace("profiles/example_gpu_8x.json", str(bad)))
    out = keep(tmp / "plan.json")
    return ["plan", cfg, "--json", out], [out]


def _model_folder(command: str):
    def build(tmp: Path, bad: Path):
        model = bad.parent  # the slot's file is the model folder's config.json
        if command == "verify":
            out = keep(tmp / "verify.json")
            return ["verify", "--model", model, "--json", out], [out]
        out = keep(tmp / "onnx" / "model.onnx")
        return ["export", "--model", model, "--out", out.parent], [out]

    return build


SLOTS: dict[str, Slot] = {
    "score --input .jsonl": (".jsonl", broken_text, _score),
    "score --input .txt": (".txt", broken_text, _score),
    "run CONFIG": (".yaml", broken_yaml, _run),
    "run workload.spec.path": (".jsonl", broken_text, _run_workload),
    "experiment contention CONFIG": (".yaml", broken_yaml, _contention),
    "bench scoring --config": (".yaml", broken_yaml, _bench_config),
    "bench scoring --workload-file": (".txt", broken_text, _bench_workload),
    "profile CONFIG": (".yaml", broken_yaml, _profile),
    "profile --fill-from": (".json", broken_text, _profile_fill_from),
    "plan CONFIG": (".yaml", broken_yaml, _plan),
    "plan profile file": (".json", broken_text, _plan_profile),
    "verify --model FOLDER": ("model/config.json", broken_text, _model_folder("verify")),
    "export --model FOLDER": ("model/config.json", broken_text, _model_folder("export")),
}


@pytest.mark.parametrize("slot", list(SLOTS))
@FUZZ
@given(data=st.data())
@example(data=None)  # the case: 2,000 random bytes (one byte 0xff so they are surely not UTF-8)
def test_broken_file_is_refused_naming_it(slot: str, data: st.DataObject | None) -> None:
    suffix, strategy, build = SLOTS[slot]
    content = data.draw(strategy(), label="content") if data is not None else bytes(range(256)) * 7 + b"\xff" * 208
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        bad = tmp / (suffix if "/" in suffix else f"input{suffix}")
        bad.parent.mkdir(exist_ok=True)
        bad.write_bytes(content)
        argv, outputs = build(tmp, bad)
        refuse(argv, [bad], outputs)


# ---- numeric flags ---------------------------------------------------------------------------------------------

NON_NUMBERS = st.sampled_from(["x", "ten", "0x10", "½", "1_0_"])  # neither int() nor float() reads them
# Not "--": argparse itself drops a "--" given as --flag=-- (the flag keeps its default), before any type check.


def _ints_below(low: int) -> st.SearchStrategy[str]:
    return st.one_of(st.integers(max_value=low - 1).map(str), st.floats(allow_nan=True).map(repr), NON_NUMBERS)


def _floats_not_above(bound: float, inclusive: bool) -> st.SearchStrategy[str]:
    bad = st.floats(max_value=bound, exclude_max=not inclusive, allow_nan=False)
    special = st.sampled_from(["nan", "inf", "-inf", "Infinity", "NaN"])
    return st.one_of(bad.map(repr), special, NON_NUMBERS)


def _outside(low: float, high: float) -> st.SearchStrategy[str]:
    bad = st.one_of(st.floats(max_value=low, exclude_max=True), st.floats(min_value=high, exclude_min=True))
    return st.one_of(bad.map(repr), st.sampled_from(["nan", "inf", "-inf"]), NON_NUMBERS)


PORT = st.one_of(st.integers(max_value=-1), st.integers(min_value=65536)).map(str) | NON_NUMBERS
INT_LIST = st.lists(st.integers(min_value=1, max_value=64), max_size=3).flatmap(
    lambda good: _ints_below(1).map(lambda bad: ",".join([*map(str, good), bad]))
)

# Each prefix also fails on its own (a missing file, an unknown runtime, an output that is a file): should a
# "bad" value ever be accepted, the test fails at once, naming the wrong problem, instead of starting work.
SCORE = ["score", "--input", "missing.jsonl", "--output", "/dev/null/out.jsonl"]
BENCH = ["bench", "scoring", "--out", "/dev/null"]
SERVE = ["serve", "--runtime", "no-such-runtime"]
CONTENTION = ["experiment", "contention", "missing.yaml"]
PLAN = ["plan", "missing.yaml"]
PROFILE_LOG = ["profile", "--from-log", "missing.jsonl", "--out", "/dev/null/profile.json"]
# (argv before the flag, flag, bad values). test_every_numeric_flag_is_listed keeps this complete.
NUMERIC_FLAGS = [
    *[
        (prefix, flag, _ints_below(1))
        for prefix in (SCORE, ["verify", "--runtimes", "nope"], BENCH, SERVE)
        for flag in ("--threads", "--max-length")
    ],
    *[
        (prefix, "--http-deadline-s", _floats_not_above(0.0, inclusive=True))
        for prefix in (SCORE, ["verify", "--runtimes", "nope"], BENCH, SERVE)
    ],
    *[  # SmoothQuant's alpha: (0, 1], so 0 itself is refused too
        (prefix, "--int8-smooth-alpha", _outside(0.0, 1.0) | st.sampled_from(["0", "0.0", "-0"]))
        for prefix in (SCORE, ["verify", "--runtimes", "nope"], BENCH, SERVE)
    ],
    (SCORE, "--batch-size", _ints_below(1)),
    (["verify", "--runtimes", "nope"], "--max-pair-flip-rate", _outside(0.0, 1.0)),
    (["verify", "--runtimes", "nope"], "--min-spearman", _outside(-1.0, 1.0)),
    (SCORE, "--budget", _ints_below(1)),
    (BENCH, "--batch-sizes", INT_LIST),
    (BENCH, "--budgets", INT_LIST),
    (BENCH, "--repeats", _ints_below(2)),
    (BENCH, "--warmup", _ints_below(0)),
    (BENCH, "--count", _ints_below(1)),
    (BENCH, "--seed", _ints_below(0)),
    (BENCH, "--worker-timeout", _floats_not_above(0.0, inclusive=True)),
    (CONTENTION, "--repeats", _ints_below(2)),
    (CONTENTION, "--target-ci", _floats_not_above(0.0, inclusive=True)),
    (CONTENTION, "--max-minutes", _floats_not_above(0.0, inclusive=True)),
    (SERVE, "--port", PORT),
    (SERVE, "--max-batch-size", _ints_below(1)),
    (SERVE, "--sub-batch-size", _ints_below(0)),
    (SERVE, "--max-wait-ms", _floats_not_above(0.0, inclusive=False)),
    (SERVE, "--max-queue", _ints_below(1)),
    (SERVE, "--timeout-s", _floats_not_above(0.0, inclusive=True)),
    (SERVE, "--max-texts", _ints_below(1)),
    (SERVE, "--max-text-chars", _ints_below(1)),
    (SERVE, "--shutdown-grace-s", _floats_not_above(0.0, inclusive=True)),
    (SERVE, "--parent-pid", _ints_below(1)),
    (PLAN, "--target-step-s", _floats_not_above(0.0, inclusive=True)),
    (PLAN, "--top", _ints_below(1)),
    (PROFILE_LOG, "--gpus", _ints_below(1)),
    (PROFILE_LOG, "--engine-gpus", _ints_below(1)),
]


@pytest.mark.parametrize("prefix,flag,values", NUMERIC_FLAGS, ids=[f"{p[0]} {f}" for p, f, _ in NUMERIC_FLAGS])
@settings(max_examples=8, deadline=None, database=None)
@given(data=st.data())
def test_out_of_range_number_is_refused_naming_the_flag(prefix, flag, values, data) -> None:
    value = data.draw(values, label="value")
    # --flag=VALUE: a value such as -5 or -inf must reach the type check, not read as another option.
    line = refuse([*prefix, f"{flag}={value}"], [flag])
    assert "error: argument" in line and "--help" in line


def _numeric_actions(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _numeric_actions(child, (*path, name))
        elif action.option_strings and action.type is not None and action.type not in (str, Path):
            yield path, action.option_strings[0], action.type


def test_every_numeric_flag_is_listed_and_range_checked() -> None:
    """Every numeric flag in the real parser has a range type (no bare int/float) and a case above."""
    found = list(_numeric_actions(build_parser()))
    bare = [f"{' '.join(p)} {flag}" for p, flag, kind in found if kind in (int, float)]
    assert not bare, f"numeric flags without a range check: {bare}"
    listed = {(prefix[0], flag) for prefix, flag, _ in NUMERIC_FLAGS}
    missing = [f"{' '.join(p)} {flag}" for p, flag, _ in found if (p[0], flag) not in listed]
    assert not missing, f"numeric flags no test covers: {missing}"
    assert len(found) >= 30  # the walk must really reach the subcommands' flags
