"""Set-up is idempotent: after `make setup`, a second run has nothing to do (issue 2)."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not (ROOT / ".venv" / ".stamps" / "native").exists(), reason="run through `make test`")
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_second_setup_run_has_nothing_to_do():
    # `make -q` exits 0 only when every set-up target is up to date, i.e. a rerun would skip all work.
    proc = subprocess.run(["make", "-q", "setup"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"`make setup` would redo work:\n{proc.stdout}{proc.stderr}"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in ci and "make test" in readme and "make run" in readme
