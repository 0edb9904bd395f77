"""Helpers for the bad-input tests (issue 18): run rlsim in-process, check a clean refusal, make broken files.

``refuse`` is the one assertion every case makes: exit status 2, exactly one line on stderr naming the
file or flag, no traceback, a bounded time, and every given output path exactly as it was before.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from hypothesis import strategies as st

from rlsim.cli.main import main

# A refusal takes milliseconds once imports are warm; the bound is loose because the test machine is shared.
HANG_BOUND_S = 30.0
KEEP = b"known content that a failed run must leave alone\n"


def refuse(argv: list[str], names: Iterable[object], untouched: Iterable[Path] = ()) -> str:
    """Run ``rlsim ARGV`` in-process and assert it refused cleanly; returns the one stderr line."""
    before = {p: (p.read_bytes() if p.is_file() else None) for p in untouched}
    err = io.StringIO()
    t0 = time.perf_counter()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as stop:  # argparse exits by itself
            rc = stop.code
    elapsed = time.perf_counter() - t0
    text = err.getvalue()
    assert rc == 2, f"rlsim {argv}: exit status {rc}, expected 2\n{text}"
    assert "Traceback" not in text, text
    lines = text.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{text}"
    for name in names:
        assert str(name) in lines[0], f"{name} not named in: {lines[0]}"
    assert elapsed < HANG_BOUND_S, f"refusal took {elapsed:.1f} s"
    for path, content in before.items():
        if content is None:
            assert not path.exists(), f"{path} was created by a run that failed"
        else:
            assert path.read_bytes() == content, f"{path} was changed by a run that failed"
    return lines[0]


def keep(path: Path) -> Path:
    """Pre-create an output file with known content, so ``refuse`` can check it is intact."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(KEEP)
    return path


# ---- broken file contents --------------------------------------------------------------------------------------

# Bytes that are not UTF-8 wherever they stand (0xc0/0xc1 only start overlong forms; 0xf5.. lie past U+10FFFF).
NEVER_UTF8 = [0xC0, 0xC1, 0xF5, 0xF8, 0xFE, 0xFF]


def random_bytes() -> st.SearchStrategy[bytes]:
    """Random bytes with at least one byte that no UTF-8 text holds (so the file is surely bad)."""
    return st.tuples(st.binary(max_size=2000), st.sampled_from(NEVER_UTF8), st.binary(max_size=200)).map(
        lambda t: t[0] + bytes([t[1]]) + t[2]
    )


def wrong_encoding() -> st.SearchStrategy[bytes]:
    """Text in UTF-16/32 (with or without BOM): one ASCII character makes a NUL byte where there is no BOM."""
    text = st.tuples(st.text(max_size=200), st.characters(min_codepoint=32, max_codepoint=126)).map("".join)
    codecs_ = st.sampled_from(["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le"])
    return st.tuples(text, codecs_).map(lambda t: t[0].encode(t[1]))


def latin1() -> st.SearchStrategy[bytes]:
    """Latin-1 text with an accented letter (0xc0..0xff, never a UTF-8 continuation) before ASCII or the end."""
    head = st.text(st.characters(min_codepoint=1, max_codepoint=255), max_size=200)
    accent = st.characters(min_codepoint=0xC0, max_codepoint=0xFF)
    tail = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=50)
    return st.tuples(head, accent, tail).map(lambda t: "".join(t).encode("latin-1"))


def with_nul() -> st.SearchStrategy[bytes]:
    """Valid UTF-8 text with a NUL byte somewhere."""
    return st.tuples(st.text(max_size=300), st.text(max_size=300)).map(lambda t: f"{t[0]}\0{t[1]}".encode())


def broken_text() -> st.SearchStrategy[bytes]:
    return st.one_of(random_bytes(), wrong_encoding(), latin1(), with_nul())


def yaml_bomb() -> st.SearchStrategy[bytes]:
    """A "billion laughs": each level lists the previous one ``width`` times, past 100,000 values in all."""

    def build(width: int) -> bytes:
        levels, size = 1, width
        while size <= 200_000:
            levels, size = levels + 1, size * width
        rows = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
        rows += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
        return ("\n".join(rows) + "\n").encode()

    return st.integers(min_value=2, max_value=12).map(build)


def duplicate_keys() -> st.SearchStrategy[bytes]:
    """A mapping (maybe nested in a section) that repeats one key."""
    key = st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True)
    keys = st.lists(key, min_size=1, max_size=6, unique=True)

    def build(args: tuple[list[str], int, bool]) -> bytes:
        names, pick, nested = args
        names = [*names, names[pick % len(names)]]
        pad = "  " if nested else ""
        body = "".join(f"{pad}{k}: {i}\n" for i, k in enumerate(names))
        return (("section:\n" + body) if nested else body).encode()

    return st.tuples(keys, st.integers(min_value=0, max_value=5), st.booleans()).map(build)


def broken_yaml() -> st.SearchStrategy[bytes]:
    return st.one_of(broken_text(), yaml_bomb(), duplicate_keys())
