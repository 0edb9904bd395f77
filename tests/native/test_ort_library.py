"""Finding ONNX Runtime's library and the native module; these tests need no compiled engine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlsim.errors import RlsimError
from rlsim.scoring import ort_library
from rlsim.scoring.ort_library import find_ort_library, load_native


@pytest.fixture(autouse=True)
def no_root_vars(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ort_library.ROOT_VARS:
        monkeypatch.delenv(var, raising=False)


def test_default_is_the_installed_packages_library() -> None:
    import onnxruntime

    found = find_ort_library()
    assert found.parent == (Path(onnxruntime.__file__).parent / "capi").resolve()
    assert found.name.startswith("libonnxruntime.so.") and found.name.endswith(onnxruntime.__version__)


def test_explicit_path_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = tmp_path / "libonnxruntime.so.1.2.3"
    lib.touch()
    monkeypatch.setenv("ORT_ROOT", str(tmp_path / "elsewhere"))
    assert find_ort_library(lib) == lib.resolve()


def test_explicit_path_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(RlsimError, match="libnothing.so does not exist; pass the path of a libonnxruntime.so"):
        find_ort_library(tmp_path / "libnothing.so")


@pytest.mark.parametrize("var", ["ORT_ROOT", "ONNXRUNTIME_ROOT"])
def test_release_folder_picks_the_newest_versioned_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str
) -> None:
    (tmp_path / "lib").mkdir()
    for version in ("1.9.0", "1.10.0"):  # 1.10 is newer, though it sorts first as text
        (tmp_path / "lib" / f"libonnxruntime.so.{version}").touch()
    (tmp_path / "lib" / "libonnxruntime_providers_shared.so").touch()
    monkeypatch.setenv(var, str(tmp_path))
    assert find_ort_library().name == "libonnxruntime.so.1.10.0"


def test_release_folder_prefers_the_unversioned_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lib").mkdir()
    real = tmp_path / "lib" / "libonnxruntime.so.1.20.1"
    real.touch()
    (tmp_path / "lib" / "libonnxruntime.so").symlink_to(real.name)
    monkeypatch.setenv("ORT_ROOT", str(tmp_path))
    assert find_ort_library() == real.resolve()


def test_release_folder_without_a_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONNXRUNTIME_ROOT", str(tmp_path))
    with pytest.raises(RlsimError, match="ONNXRUNTIME_ROOT=.* has no lib/libonnxruntime.so.*unset it"):
        find_ort_library()


def test_no_package_and_no_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ort_library, "_package_capi_dir", lambda: None)
    with pytest.raises(RlsimError, match="no ONNX Runtime library found: `pip install onnxruntime`.*ORT_ROOT"):
        find_ort_library()


def test_unbuilt_native_module_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes the import fail exactly as an unbuilt extension does.
    monkeypatch.setitem(sys.modules, "rlsim._native", None)
    with pytest.raises(RlsimError, match=r"native engine is not built; run `make native` \(or `pip install -e \.`\)"):
        load_native()
