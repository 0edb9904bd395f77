"""benchmarks/loop_repeatability.py: identical runs compared phase by phase, different work refused,
steps other programs disturbed left out of both runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def write_run(folder: Path, totals: list[float], tokens: list[int], foreign: list[float] | None = None) -> None:
    steps = [
        {
            "step": i,
            "time_s": {"generate": t / 2, "score": t / 4, "update": t / 4, "sync": 0.0, "idle": 0.0, "total": t},
            "rollouts": {"generated": 4, "scored": 4, "trained": 4},
            "tokens": {"generated": n},
        }
        for i, (t, n) in enumerate(zip(totals, tokens, strict=True), start=1)
    ]
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"config": {}, "complete": True, "steps": steps}))
    if foreign is not None:
        load = [{"step": i, "foreign_cpu_share": x} for i, x in enumerate(foreign, start=1)]
        (folder / "machine_load.json").write_text(json.dumps({"steps": load}))


def test_same_work_is_compared_and_different_work_skipped(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_run(a / "same", [9.0, 10.0, 12.0], [100, 200, 300])
    write_run(b / "same", [5.0, 8.0, 12.0], [100, 200, 300])  # step 1 (warm-up) left out: 22 / 20 - 1
    write_run(a / "other", [1.0, 1.0, 1.0], [100, 200, 300])
    write_run(b / "other", [1.0, 1.0, 1.0], [100, 250, 300])
    write_run(a / "noisy", [1.0, 2.0, 9.0], [1, 2, 3])
    write_run(b / "noisy", [1.0, 1.0, 3.0], [1, 2, 3], foreign=[0.0, 0.0, 0.4])  # step 3 disturbed in b
    script = ROOT / "benchmarks" / "loop_repeatability.py"
    done = subprocess.run(
        [sys.executable, str(script), str(a), str(b), "--name", "t", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads((tmp_path / "loop_repeatability_t.json").read_text())
    assert result["pairs"]["same"]["total"] == pytest.approx(0.1)
    assert result["pairs"]["noisy"]["total"] == pytest.approx(1.0)  # step 2 only: 2 / 1 - 1
    assert result["disturbed_steps_left_out"] == {"noisy": [3]}
    assert "generated tokens differ" in result["skipped"]["other"]
    assert json.loads(done.stdout.splitlines()[-1])["pairs"] == 2


def test_interleaved_rounds_run_the_whole_set_each_round_and_close_the_runner(tmp_path: Path) -> None:
    from rlsim.errors import RlsimError
    from rlsim.loop.config import RunConfig
    from rlsim.planner.measure.loop_runner import run_rounds
    from rlsim.planner.measure.loop_set import LoopCase

    class Stub:
        def __init__(self, fail_at: int | None = None) -> None:
            self.ran: list[str] = []
            self.closed = False
            self.fail_at = fail_at

        def run(self, case: LoopCase, out: Path) -> object:
            if len(self.ran) == self.fail_at:
                raise RuntimeError("engine died")
            self.ran.append(f"{out.parent.name}/{case.name}")
            return None

        def close(self) -> None:
            self.closed = True

    cases = [LoopCase(n, "", RunConfig()) for n in ("a", "b", "c")]
    stub = Stub()
    folders = run_rounds(cases, stub, 2, tmp_path)  # type: ignore[arg-type]
    assert stub.ran == ["round-1/a", "round-1/b", "round-1/c", "round-2/a", "round-2/b", "round-2/c"]
    assert folders == [tmp_path / "round-1", tmp_path / "round-2"] and stub.closed
    failing = Stub(fail_at=4)
    with pytest.raises(RuntimeError, match="engine died"):
        run_rounds(cases, failing, 3, tmp_path)  # type: ignore[arg-type]
    assert failing.closed and len(failing.ran) == 4
    with pytest.raises(RlsimError, match="rounds must be at least 2"):
        run_rounds(cases, Stub(), 1, tmp_path)  # type: ignore[arg-type]


def test_the_floor_has_a_mean_with_its_interval_and_bad_arguments_are_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for name, (x, y) in {"p": (10.0, 11.0), "q": (10.0, 9.0), "r": (10.0, 10.4)}.items():
        write_run(a / name, [1.0, x], [1, 2])
        write_run(b / name, [1.0, y], [1, 2])
    script = ROOT / "benchmarks" / "loop_repeatability.py"
    subprocess.run([sys.executable, str(script), str(a), str(b), "--name", "f", "--out", str(tmp_path)], check=True)
    total = json.loads((tmp_path / "loop_repeatability_f.json").read_text())["summary"]["total"]
    # |10/11 - 1|, |10/9 - 1|, |10/10.4 - 1|: mean 0.0740, and a t-interval around it.
    assert total["mean_abs"] == pytest.approx((1 / 11 + 1 / 9 + 0.4 / 10.4) / 3, abs=1e-4)
    low, high = total["mean_abs_ci95"]
    assert low < total["mean_abs"] < high and total["max_abs"] == pytest.approx(1 / 9, abs=1e-4)
    for argv, message in (
        ([str(a), "--run", str(tmp_path / "set.yaml")], "either --run SET.yaml or two folders"),
        (["--run", str(tmp_path / "missing.yaml")], "no such loop set YAML"),
        (["--run", str(script), "--rounds", "1"], "--rounds must be at least 2"),
        ([str(a)], "give two folders of runs to compare, or --run"),
    ):
        done = subprocess.run([sys.executable, str(script), *argv, "--name", "x"], capture_output=True, text=True)
        assert done.returncode == 2 and message in done.stderr, done.stderr
