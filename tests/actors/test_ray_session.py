"""The full-disk check before a Ray starts here: one clear line instead of OutOfDiskError mid-step."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from rlsim.actors import ray_session
from rlsim.actors.ray_session import disk_room_problem, ray_disk_threshold, ray_temp_dir
from rlsim.errors import RlsimError

GB = 1_000_000_000


def fake_disk(monkeypatch: pytest.MonkeyPatch, total: int, free: int) -> None:
    usage = shutil._ntuple_diskusage(total, total - free, free)  # type: ignore[attr-defined]
    monkeypatch.setattr(ray_session.shutil, "disk_usage", lambda path: usage)


def test_a_disk_past_rays_line_names_the_room_to_free_and_the_way_around(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # 252 GB with 10 GB available: Ray's 1 - 10/252 = 96%, over 95%; 2.6 GB short of the line, +1 GB of room
    fake_disk(monkeypatch, 252 * GB, 10 * GB)
    problem = disk_room_problem(tmp_path / "not" / "made" / "yet", 0.95)
    assert problem is not None
    assert f"({tmp_path})" in problem  # the nearest folder that exists
    assert "96% full" in problem and "10.0 of 252 GB" in problem
    assert "Free at least 3.6 GB" in problem and "RAY_TMPDIR" in problem


def test_a_disk_under_the_line_is_no_problem(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_disk(monkeypatch, 252 * GB, 13 * GB)  # 94.8%
    assert disk_room_problem(tmp_path, 0.95) is None
    assert disk_room_problem(tmp_path, 0.90) is not None


def test_rays_own_settings_choose_the_folder_and_the_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.setenv("RAY_local_fs_capacity_threshold", "0.99")
    assert ray_temp_dir() == tmp_path and ray_disk_threshold() == 0.99
    monkeypatch.delenv("RAY_local_fs_capacity_threshold")
    assert ray_disk_threshold() == 0.95
    for bad in ("nan", "inf", "lots"):  # not a fraction: Ray's default is what it would fall back to
        monkeypatch.setenv("RAY_local_fs_capacity_threshold", bad)
        assert ray_disk_threshold() == 0.95


def test_a_threshold_of_one_or_more_turns_the_check_off_as_in_ray(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_disk(monkeypatch, 100 * GB, 0)
    assert disk_room_problem(tmp_path, 1.0) is None and disk_room_problem(tmp_path, 0.95) is not None


def test_connect_refuses_before_ray_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_disk(monkeypatch, 100 * GB, 1 * GB)
    monkeypatch.setattr(ray_session.ray, "is_initialized", lambda: False)

    def no_init(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("ray.init was called on a full disk")

    monkeypatch.setattr(ray_session.ray, "init", no_init)
    with pytest.raises(RlsimError, match="99% full"):
        ray_session.connect_ray()
