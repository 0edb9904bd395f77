"""Atomic result writing: a reader never sees a half-written file, and Ctrl-C never loses old data."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file in the same folder and ``os.replace``."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
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
    return target


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
