"""The generator side's weights folder: made only when weights arrive, and never left behind."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from rlsim.rollout.weights import WeightsFolder


def _folders(tmp_path) -> list:
    return sorted(tmp_path.glob("rlsim-weights-*"))


@pytest.fixture(autouse=True)
def _private_tmp(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR


def test_no_folder_until_the_first_write_and_none_after_close(tmp_path) -> None:
    folder = WeightsFolder()
    assert _folders(tmp_path) == []  # a worker whose weights never move (simulated sync) makes nothing
    path = folder.write({"w": np.ones((2, 3), np.float32)})
    assert _folders(tmp_path) == [path] and (path / "model.safetensors").is_file()
    assert folder.write({"w": np.zeros((2, 3), np.float32)}) == path  # replaced in place
    folder.close()
    folder.close()
    assert _folders(tmp_path) == []


def test_a_folder_dropped_without_close_is_removed(tmp_path) -> None:
    folder = WeightsFolder()
    folder.write({"w": np.ones(4, np.float32)})
    del folder
    gc.collect()
    assert _folders(tmp_path) == []


def test_an_empty_state_is_refused() -> None:
    with pytest.raises(ValueError, match="empty state"):
        WeightsFolder().write({})


def test_a_killed_processes_folder_is_removed_by_the_next_one(tmp_path) -> None:
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f"rlsim-weights-{gone.stdout.strip()}-abc"  # what a worker killed outright leaves
    left.mkdir()
    (left / "model.safetensors").write_bytes(b"weights")
    folder = WeightsFolder()
    path = folder.write({"w": np.ones(4, np.float32)})
    assert _folders(tmp_path) == [path] and not left.exists()
    folder.close()
