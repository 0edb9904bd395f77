"""User-facing errors.

Every problem a user can cause (bad config, missing model, unbuilt engine, ...) is raised as an
``RlsimError`` whose message names the problem *and* the fix. The CLI prints the message and exits
with status 2 instead of a traceback.
"""

from __future__ import annotations


class RlsimError(Exception):
    """A problem the user can fix; ``str(err)`` says what is wrong and how to fix it."""


class ConfigError(RlsimError):
    """One or more invalid settings. ``errors`` lists every problem found, not just the first."""

    def __init__(self, errors: list[str], source: str = "config") -> None:
        self.errors = list(errors)
        if len(self.errors) == 1:  # one problem reads best on one line (and greps as one)
            super().__init__(f"{source}: {self.errors[0]}")
            return
        lines = "\n".join(f"  - {e}" for e in self.errors)
        super().__init__(f"{source} has {len(self.errors)} error(s):\n{lines}")
