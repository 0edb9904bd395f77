"""rlsim's diagnostics: stdlib ``logging`` under the ``rlsim`` logger, set up once by the CLI.

Library modules log to ``logging.getLogger(__name__)``; ``rlsim <command>`` shows rlsim's INFO and above on
stderr as ``rlsim <package>: [warning: |error: ]message``. ``-v`` adds rlsim's DEBUG lines and lets the
third-party libraries rlsim quiets speak again: transformers' load reports and progress bars, Ray's start-up
logs, and vLLM's logs (those land in the Ray workers' log files, as Ray's workers do not log to the driver).
The flag travels in an environment variable because the code that loads models runs in Ray workers and in the
scoring server's process, which inherit the environment but not the CLI's arguments.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

VERBOSE_ENV = "RLSIM_VERBOSE"


def verbose() -> bool:
    """True when ``-v`` was given to this process or to the rlsim process that started it."""
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0")


def configure(verbose_flag: bool = False) -> None:
    """Send rlsim's log records to stderr (INFO and above; DEBUG too with ``verbose_flag``). Idempotent."""
    if verbose_flag:
        os.environ[VERBOSE_ENV] = "1"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    root = logging.getLogger("rlsim")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose() else logging.INFO)
    # rlsim's lines keep their own format even where a library has configured the root logger.
    root.propagate = False


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' warnings and progress bars unless -v (``verbose``).

    Loading MiniLM with ``num_labels=1`` prints a load report listing ``classifier.weight MISSING``: true and
    intended (the builder seeds that head), but alarming on a newcomer's first screen; ``rlsim profile`` loads the
    policy for its roles timing in its own process, where "Loading weights" bars would tear through its progress.
    """
    if verbose():
        yield
        return
    from transformers.utils import logging as hf_logging

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


class _Formatter(logging.Formatter):
    """``rlsim serve: warning: ...`` for a record of ``rlsim.serve.app``: which part speaks, and how loud."""

    def format(self, record: logging.LogRecord) -> str:
        parts = record.name.split(".")
        prefix = f"rlsim {parts[1]}" if len(parts) > 1 else "rlsim"
        level = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
        text = f"{prefix}: {level}{record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text
