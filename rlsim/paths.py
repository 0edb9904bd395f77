"""Where rlsim keeps materialised models and exported graphs."""

from __future__ import annotations

import os
from pathlib import Path


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
