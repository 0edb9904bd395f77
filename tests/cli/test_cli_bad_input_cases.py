"""The fixed bad-input cases of issue 18, each with its expected message worked out by hand.

Wrong encodings, a BOM before JSON, a 50 MB line, NUL bytes, a folder where a file belongs, a file
that cannot be read, and outputs in a missing, read-only or wrong-kind place, for every command that
writes. A few run the real entry point (``python -m rlsim``) to prove the exit status and the absence
of a traceback there too.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers.bad_input import KEEP, keep, refuse

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
ROOT_SKIP = "runs as root: root reads and writes whatever the mode bits say (the simulated case covers it)"


def _jsonl(tmp: Path, data: bytes, name: str = "in.jsonl") -> Path:
    path = tmp / name
    path.write_bytes(data)
    return path


def _score(src: Path, out: Path) -> list[object]:
    return ["score", "--model", "minilm-rm", "--runtime", "ort", "--input", src, "--output", out]


# ---- encodings --------------------------------------------------------------------------------------------------


def test_utf16_with_bom_is_named_utf16(tmp_path):
    src = _jsonl(tmp_path, '{"text": "hi"}\n'.encode("utf-16"))
    out = keep(tmp_path / "out.jsonl")
    line = refuse(_score(src, out), [src, "UTF-16", "UTF-8"], [out])
    assert "iconv" in line


def test_utf16_without_bom_is_refused_at_its_first_nul(tmp_path):
    # '{' is 7b 00 in UTF-16-LE: the NUL is byte 1 of line 1.
    src = _jsonl(tmp_path, '{"text": "hi"}\n'.encode("utf-16-le"))
    out = keep(tmp_path / "out.jsonl")
    refuse(_score(src, out), [src, "line 1, byte offset 1", "NUL"], [out])


def test_latin1_names_line_and_byte_offset(tmp_path):
    # "ok\n" is bytes 0-2; "caf" 3-5; the Latin-1 é (0xe9) is byte 6 of the file, offset 3 of line 2.
    src = _jsonl(tmp_path, "ok\ncafé\n".encode("latin-1"), "in.txt")
    out = tmp_path / "out.jsonl"
    refuse(_score(src, out), [src, "line 2, byte offset 3 (byte 6 of the file)", "0xe9"], [out])


def test_bom_before_json_is_read_as_utf8(tmp_path):
    """The BOM is dropped, so line 1 is valid JSON and the error is the bad line 2, not the BOM."""
    src = _jsonl(tmp_path, b'\xef\xbb\xbf{"text": "first"}\nnot json\n')
    out = keep(tmp_path / "out.jsonl")
    refuse(_score(src, out), [f"{src}:2 is not valid JSON"], [out])


def test_fifty_megabyte_line_is_refused_quickly_with_its_offset(tmp_path):
    # '{"text": "' is 10 bytes, then 50,000,000 'a', then the Latin-1 byte: offset 50,000,010 of line 1.
    src = _jsonl(tmp_path, b'{"text": "' + b"a" * 50_000_000 + b'\xe9"}\n')
    out = keep(tmp_path / "out.jsonl")
    refuse(_score(src, out), [src, "line 1, byte offset 50000010"], [out])  # refuse() bounds the time


def test_nul_byte_in_yaml_config_names_line_and_offset(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_bytes(b"steps: 3\nname: a\x00b\n")  # 'name: a' is 7 bytes: the NUL is offset 7 of line 2
    out = keep(tmp_path / "run" / "results.json")
    refuse(["run", cfg, "--out", out.parent], [cfg, "line 2, byte offset 7", "NUL"], [out])


# ---- the wrong kind of path ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["score", "run", "plan", "profile", "bench"])
def test_folder_where_a_file_belongs(tmp_path, command):
    folder = tmp_path / ("in.jsonl" if command in ("score", "bench") else "config.yaml")
    folder.mkdir()
    out = keep(tmp_path / "out.json")
    argv = {
        "score": _score(folder, out),
        "run": ["run", folder, "--out", tmp_path / "run"],
        "plan": ["plan", folder, "--json", out],
        "profile": ["profile", folder, "--out", out],
        "bench": ["bench", "scoring", "--workload-file", folder, "--out", tmp_path / "bench"],
    }[command]
    refuse(argv, [folder, "is a folder"], [out])


@pytest.mark.skipif(IS_ROOT, reason=ROOT_SKIP)
def test_file_without_read_permission(tmp_path):
    src = _jsonl(tmp_path, b'{"text": "hi"}\n')
    src.chmod(0)
    out = keep(tmp_path / "out.jsonl")
    refuse(_score(src, out), [src, "permission denied"], [out])


def test_file_that_cannot_be_read_simulated(tmp_path):
    """Root reads a chmod 000 file, so point at one the kernel refuses even to root: a write-only sysctl."""
    target = Path("/proc/sys/vm/compact_memory")
    try:
        target.read_bytes()
    except PermissionError:
        pass
    except OSError:
        pytest.skip(f"{target} is missing here")
    else:
        pytest.skip(f"{target} is readable here")
    src = tmp_path / "in.jsonl"
    src.symlink_to(target)
    out = keep(tmp_path / "out.jsonl")
    refuse(_score(src, out), [src, "permission denied"], [out])


def test_character_device_is_refused_not_read_forever(tmp_path):
    src = tmp_path / "in.txt"
    src.symlink_to("/dev/zero")
    refuse(_score(src, tmp_path / "out.jsonl"), [src, "not a regular file"], [tmp_path / "out.jsonl"])


# ---- outputs: every command that writes ------------------------------------------------------------------------


def _good_input(tmp: Path) -> Path:
    return _jsonl(tmp, b'{"text": "hello"}\n', "good.jsonl")


# (command, flag, file or dir, argv builder taking the output path)
WRITERS = [
    ("score", "--output", "file", lambda t, o: _score(_good_input(t), o)),
    ("verify", "--json", "file", lambda t, o: ["verify", "--runtimes", "ort", "--json", o]),
    ("export", "--out", "dir", lambda t, o: ["export", "--out", o]),
    ("run", "--out", "dir", lambda t, o: ["run", CONFIGS / "default.yaml", "--out", o]),
    (
        "experiment",
        "--out",
        "dir",
        lambda t, o: ["experiment", "contention", CONFIGS / "contention_cpu.yaml", "--out", o],
    ),
    ("bench", "--out", "dir", lambda t, o: ["bench", "scoring", "--quick", "--out", o]),
    ("profile", "--out", "file", lambda t, o: ["profile", CONFIGS / "profiles" / "measure_cpu_2core.yaml", "--out", o]),
    (
        "profile",
        "--summary",
        "file",
        lambda t, o: [
            "profile",
            CONFIGS / "profiles" / "measure_cpu_2core.yaml",
            "--out",
            t / "p.json",
            "--summary",
            o,
        ],
    ),
    (
        "profile",
        "--runs",
        "dir",
        lambda t, o: ["profile", CONFIGS / "profiles" / "measure_cpu_2core.yaml", "--out", t / "p.json", "--runs", o],
    ),
    ("plan", "--json", "file", lambda t, o: ["plan", CONFIGS / "cluster_example.yaml", "--json", o]),
    ("plan", "--out", "dir", lambda t, o: ["plan", CONFIGS / "cluster_example.yaml", "--out", o]),
    ("serve", "--port-file", "file", lambda t, o: ["serve", "--no-warmup", "--port-file", o]),
]
IDS = [f"{c} {f}" for c, f, _, _ in WRITERS]


@pytest.mark.parametrize("command,flag,kind,argv", WRITERS, ids=IDS)
def test_output_of_the_wrong_kind(tmp_path, command, flag, kind, argv):
    """A file flag given a folder, or a folder flag given an existing file (which must stay intact)."""
    if kind == "file":
        out = tmp_path / "out.json"
        out.mkdir()
        (out / "inside").write_bytes(KEEP)
        refuse(argv(tmp_path, out), [flag, out, "is a folder"], [out / "inside"])
    else:
        out = keep(tmp_path / "out")
        refuse(argv(tmp_path, out), [flag, out, "is a file"], [out])


@pytest.mark.parametrize(
    "command,flag,kind,argv",
    [w for w in WRITERS if w[2] == "file"],
    ids=[i for i, w in zip(IDS, WRITERS, strict=True) if w[2] == "file"],
)
def test_output_in_a_missing_folder(tmp_path, command, flag, kind, argv):
    out = tmp_path / "no" / "such" / "out.json"
    refuse(argv(tmp_path, out), [flag, "does not exist", "mkdir -p"], [out])
    assert not (tmp_path / "no").exists()


def _unwritable_folder() -> Path | None:
    """A folder even root cannot create files in (sysfs), or None where there is none."""
    for folder in (Path("/sys/kernel"), Path("/proc")):
        try:
            fd, probe = tempfile.mkstemp(dir=folder)
        except OSError:
            return folder
        os.close(fd)
        os.unlink(probe)
    return None


@pytest.mark.parametrize("command,flag,kind,argv", WRITERS, ids=IDS)
def test_output_in_a_read_only_folder_simulated(tmp_path, command, flag, kind, argv):
    folder = _unwritable_folder()
    if folder is None:
        pytest.skip("no folder here refuses writes to this user")
    out = folder / "rlsim-out.json"
    refuse(argv(tmp_path, out), [flag, "cannot write in folder"], [out])


@pytest.mark.skipif(IS_ROOT, reason=ROOT_SKIP)
def test_output_in_a_chmod_read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    out = folder / "out.jsonl"
    refuse(_score(_good_input(tmp_path), out), ["--output", "cannot write in folder"], [out])


# ---- the real entry point ----------------------------------------------------------------------------------------


def _rlsim(*argv: object) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "rlsim", *map(str, argv)]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)


def test_issue_case_random_bytes_through_the_entry_point(tmp_path):
    """The issue's report: 2,000 random bytes gave a UnicodeDecodeError traceback and exit 1."""
    src = tmp_path / "random.txt"
    src.write_bytes(random.Random(18).randbytes(2000))
    out = tmp_path / "out.jsonl"
    proc = _rlsim("score", "--model", "minilm-rm", "--runtime", "ort", "--input", src, "--output", out)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(src) in lines[0] and "byte offset" in lines[0] and "UTF-8" in lines[0]
    assert not out.exists()


def test_alias_bomb_config_through_the_entry_point(tmp_path):
    cfg = tmp_path / "bomb.yaml"
    rows = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    rows += [f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)]
    cfg.write_text("\n".join(rows) + "\n")  # 10^9 strings once expanded
    proc = _rlsim("run", cfg, "--out", tmp_path / "run")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "alias" in proc.stderr and str(cfg) in proc.stderr
    assert not (tmp_path / "run").exists()


def test_out_of_range_flag_through_the_entry_point():
    proc = _rlsim("serve", "--port", "70000")
    assert proc.returncode == 2
    expected = (
        "rlsim serve: error: argument --port: 70000 is out of range; give a TCP port 0..65535 (0 picks a free one); "
        "see `rlsim serve --help`"
    )
    assert proc.stderr.strip().splitlines() == [expected]
