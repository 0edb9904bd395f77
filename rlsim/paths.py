"""Where rlsim keeps materialised models and exported graphs, how a cached folder is built once, and the scratch
folders a process makes in the temp folder."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import psutil


def cache_dir() -> Path:
    """``$RLSIM_CACHE``, else ``$XDG_CACHE_HOME/rlsim``, else ``~/.cache/rlsim``."""
    env = os.environ.get("RLSIM_CACHE")
    if env:
        root = Path(env).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = (Path(xdg) if xdg else Path.home() / ".cache") / "rlsim"
    root.mkdir(parents=True, exist_ok=True)
    return root


def build_folder_once(out: Path, done: Callable[[Path], bool], build: Callable[[Path], None]) -> None:
    """Make the cached folder ``out`` unless ``done(out)``: ``build(tmp)`` fills a fresh folder beside it, which
    then replaces ``out`` in one rename, so a reader never sees half a folder. A file lock beside ``out`` makes
    concurrent processes wait for the first one's result instead of building it again."""
    if done(out):
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done(out):
            return
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            build(tmp)
            if out.exists():
                shutil.rmtree(out)
            tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def process_folder(prefix: str) -> Path:
    """A new folder ``<prefix><pid>-*`` in the temp folder for this process's scratch files, made after removing
    the folders of that prefix whose process is gone: a process killed outright (an actor ``ray.kill`` ends)
    cannot remove its own."""
    remove_dead_folders(prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


def remove_dead_folders(prefix: str, base: Path | None = None) -> list[Path]:
    """Remove the ``<prefix><pid>-*`` folders in ``base`` (the temp folder) whose process is gone; return them."""
    removed = []
    for folder in Path(base or tempfile.gettempdir()).glob(f"{prefix}*-*"):
        pid = folder.name[len(prefix) :].split("-", 1)[0]
        if folder.is_dir() and pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed
