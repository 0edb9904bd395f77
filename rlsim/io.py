"""Files in and out: user text read under one decoding policy, output paths checked before work, atomic writes.

Atomic writing means a reader never sees a half-written file, and Ctrl-C (or a failed run) never loses old data.
"""

from __future__ import annotations

import codecs
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from rlsim.errors import RlsimError


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file in the same folder and ``os.replace``."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    with atomic_writer(path) as f:
        f.write(data)
    return Path(path)


@contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new contents into (a large file need not be built in memory first);
    it replaces ``path`` when the block ends, and is removed if the block raises."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        # mkstemp creates 0600; results are meant to be read like any file the user writes.
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once: reading it means setting it, and setting the process umask on every write would race
# with other threads (the server's, Ray's) creating files meanwhile.
_UMASK = _read_umask()


def atomic_write_json(path: str | os.PathLike[str], obj: Any, indent: int = 2) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=indent, sort_keys=False, default=_default) + "\n")


def _default(obj: Any) -> Any:
    # numpy scalars and arrays show up in results; make them plain JSON.
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot write {type(obj).__name__} as JSON")


# ---- reading what the user gives -------------------------------------------------------------------------------

_CONVERT = "re-save it as UTF-8 (e.g. `iconv -f LATIN1 -t UTF-8 IN > OUT`, or `-f UTF-16` for UTF-16)"


def read_user_text(path: str | os.PathLike[str], what: str = "file", missing_fix: str = "check the path") -> str:
    """The text of a file the user named, under rlsim's one decoding policy.

    UTF-8, with or without a byte-order mark (dropped); line endings are kept as they are. Anything
    else -- UTF-16 (with or without its BOM), Latin-1, binary, NUL bytes -- is refused with one
    ``RlsimError`` naming the file, the line and the byte offset of the first bad byte, and the fix.
    ``what`` names the file's role in messages ("text file", "config file").
    """
    p = Path(path).expanduser()
    data = _read_bytes(p, what, missing_fix)
    # The UTF-32-LE mark begins with the UTF-16-LE one; either way it is not UTF-8.
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise RlsimError(
            f"{what} {p} is UTF-16 (it starts with a UTF-16 byte-order mark); rlsim reads UTF-8: {_CONVERT}"
        )
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    nul = data.find(b"\0", skip)
    try:
        text = data[skip:].decode("utf-8")
    except UnicodeDecodeError as err:
        bad = skip + err.start
        if nul == -1 or bad < nul:
            line, col = _position(data, bad)
            raise RlsimError(
                f"{what} {p}: line {line}, byte offset {col} (byte {bad} of the file) is not UTF-8 "
                f"(0x{data[bad]:02x}); rlsim reads UTF-8 text, with or without a BOM: {_CONVERT}"
            ) from None
        text = ""
    if nul != -1:
        line, col = _position(data, nul)
        raise RlsimError(
            f"{what} {p}: line {line}, byte offset {col} (byte {nul} of the file) is a NUL byte (a binary file, or "
            f"UTF-16 without a byte-order mark?); rlsim reads UTF-8 text: {_CONVERT}"
        )
    return text


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """(line from 1, byte offset within that line from 0) of ``data[offset]``; linear, so a 50 MB line is fine."""
    start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - start


def _read_bytes(p: Path, what: str, missing_fix: str) -> bytes:
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise RlsimError(f"{what} {p} does not exist; {missing_fix}") from None
    except OSError as err:
        raise RlsimError(f"{what} {p} cannot be opened ({err.strerror}); check the path") from None
    if stat.S_ISDIR(mode):
        raise RlsimError(f"{what} {p} is a folder, not a file; pass the file inside it")
    # A character device (/dev/zero, a terminal) never ends or blocks for input; a pipe (`<(cmd)`) is fine.
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise RlsimError(f"{what} {p} is not a regular file (a device or socket); pass a text file")
    try:
        return p.read_bytes()
    except PermissionError:
        raise RlsimError(
            f"{what} {p} cannot be read (permission denied); make it readable (chmod +r) or copy it"
        ) from None
    except OSError as err:
        raise RlsimError(f"{what} {p} cannot be read ({err.strerror}); check the file and the disk") from None


# ---- checking where results will go, before any work ------------------------------------------------------------


def check_output_file(path: str | os.PathLike[str], flag: str) -> Path:
    """Refuse now an output file the run could not write at its end: a folder, a missing or unwritable folder.

    Called before any model loads, so a bad path costs nothing; the write itself stays atomic, so an
    existing file at ``path`` is replaced only by a complete result.
    """
    p = Path(path).expanduser()
    if p.is_dir():
        raise RlsimError(f"{flag} {p} is a folder; give a file path inside it, e.g. {p / 'result.json'}")
    folder = p.parent
    if not folder.is_dir():
        if folder.exists():
            raise RlsimError(f"{flag} {p}: {folder} is a file, not a folder; choose another path")
        raise RlsimError(
            f"{flag} {p}: folder {folder} does not exist; create it (mkdir -p {folder}) or write elsewhere"
        )
    _check_writable(folder, flag, p)
    return p


def check_output_dir(path: str | os.PathLike[str], flag: str) -> Path:
    """Refuse now an output folder the run could not create or write (missing parents are created later)."""
    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise RlsimError(f"{flag} {p} is a file, not a folder; give a folder path (it is created if missing)")
    existing = p
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise RlsimError(f"{flag} {p}: {existing} is a file, so the folder cannot be created; choose another path")
    _check_writable(existing, flag, p)
    return p


def _check_writable(folder: Path, flag: str, target: Path) -> None:
    # Try it rather than read mode bits: read-only mounts, ACLs and root all answer truthfully this way.
    try:
        fd, probe = tempfile.mkstemp(prefix=".rlsim-probe.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise RlsimError(
            f"{flag} {target}: cannot write in folder {folder} ({err.strerror}); choose a writable folder"
        ) from None
