"""rich output that stays readable in a log: a progress bar that still shows progress when stderr is not a
terminal, and consoles that do not cut tables to 80 columns when piped (``make_console``).

rich draws a live bar only on an interactive terminal; piped into a file or a CI log it prints the
final frame when the work ends, so a 20-minute experiment looks hung. ``LineProgress`` behaves like
``rich.progress.Progress`` on a terminal and, elsewhere, prints one plain line whenever a task's
description changes (and at most every ``min_interval_s`` for bare advances), e.g.::

    [  42s] 12/106 repeat 1/5 step 1: ort together
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import Progress, TaskID

# Piped into a file or a CI log, rich would lay every table out at 80 columns, cutting cells to `run…`; a table
# only takes the width its cells need, so a wide limit keeps whole tables (rlsim plan's has 14 columns).
PIPED_WIDTH = 1000


def make_console(stderr: bool = False) -> Console:
    """A rich console for rlsim's output: the terminal's width on a terminal, whole lines when piped."""
    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=PIPED_WIDTH)
    return console


class LineProgress(Progress):
    """``rich.progress.Progress`` plus plain progress lines on a non-interactive console."""

    def __init__(self, *columns: Any, min_interval_s: float = 10.0, **kwargs: Any) -> None:
        super().__init__(*columns, **kwargs)
        self._lines = not self.console.is_terminal and not self.disable
        self._min_interval_s = min_interval_s
        self._last: dict[TaskID, tuple[str, float]] = {}
        self._t0 = time.monotonic()

    def update(self, task_id: TaskID, **kwargs: Any) -> None:  # noqa: D102 (same as Progress.update)
        super().update(task_id, **kwargs)
        self._echo(task_id)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:  # noqa: D102
        super().advance(task_id, advance)
        self._echo(task_id)

    def _echo(self, task_id: TaskID) -> None:
        if not self._lines:
            return
        task = self._tasks[task_id]
        now = time.monotonic()
        last_text, last_t = self._last.get(task_id, ("", -1e9))
        if task.description == last_text and now - last_t < self._min_interval_s:
            return
        self._last[task_id] = (task.description, now)
        done = f"{task.completed:.0f}/{task.total:.0f} " if task.total else ""
        self.console.print(
            f"[{now - self._t0:5.0f}s] {done}{task.description}", highlight=False, markup=False, soft_wrap=True
        )
