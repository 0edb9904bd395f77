"""A vLLM engine that dies says why in one line, not "See root cause above".

vLLM runs its engine core and workers in child processes. When one of them fails (a weight file cut short, an
index out of range in a logits processor), the driver only gets a generic exception ("Engine core initialization
failed. See root cause above.", vLLM's ``EngineDeadError``: "EngineCore encountered an issue. See stack trace
(above)"), while the cause is logged by the child to the stdout/stderr it inherited: under Ray that is the
actor's worker log file, which ``rlsim run`` never shows. The children write to this process's own descriptors
1 and 2, so their last lines are read back from there (when they are files, as under Ray or pytest) and the last
exception line that is not one of vLLM's generic ones becomes the message.
"""

from __future__ import annotations

import os
import re
import stat

from rlsim.errors import RlsimError

# vLLM's own wrappers around a child's failure (vllm/v1/engine/core.py, vllm/v1/executor/multiproc_executor.py,
# vllm/v1/engine/exceptions.py): they say a cause exists, not what it is.
GENERIC = (
    "Engine core initialization failed",
    "WorkerProc initialization failed",
    "EngineCore encountered an issue",
    "EngineCore encountered a fatal error",
    "Engine process failed to start",
)
_EXCEPTION_LINE = re.compile(r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)): (.+?)\s*$")
_TAIL_BYTES = 256 * 1024


def is_engine_failure(err: BaseException) -> bool:
    """True for vLLM's generic exceptions about a failed or dead engine process."""
    return type(err).__name__ == "EngineDeadError" or any(g in str(err) for g in GENERIC)


def root_cause(text: str) -> str | None:
    """The last ``SomeError: message`` line of ``text`` that is not one of vLLM's generic wrappers."""
    for line in reversed(text.splitlines()):
        match = _EXCEPTION_LINE.search(line)
        if match and not any(g in match.group(2) for g in GENERIC):
            return f"{match.group(1).rsplit('.', 1)[-1]}: {match.group(2)}"
    return None


def own_output_tail(fds: tuple[int, ...] = (1, 2), limit: int = _TAIL_BYTES) -> str:
    """The last ``limit`` bytes written to each of this process's descriptors that is a regular file."""
    parts = []
    for fd in fds:
        path = f"/proc/self/fd/{fd}"
        try:
            # Only a regular file: reading a terminal or a pipe would take input or data meant for others.
            if not stat.S_ISREG(os.stat(path).st_mode):
                continue
            with open(path, "rb") as f:  # also works for an unlinked file (pytest's capture)
                f.seek(max(0, os.fstat(f.fileno()).st_size - limit))
                parts.append(f.read().decode("utf-8", errors="replace"))
        except OSError:
            continue
    return "\n".join(parts)


def engine_failure(
    err: BaseException,
    doing: str,
    policy_dir: object,
    actor: str = "rollout",
    advice: str = "fix the folder or the policy settings, or try policy.backend: hf to see the same error from "
    "transformers",
    folder: str = "policy folder",
) -> RlsimError:
    """An ``RlsimError`` naming the engine's root cause (or where to find it) for a generic vLLM failure; the
    defaults speak of the policy's engine, a reward model's engine passes its own ``actor``/``advice``/``folder``."""
    cause = root_cause(own_output_tail())
    if cause is None:
        return RlsimError(
            f"vLLM's engine failed while {doing} ({err}); its cause is in the {actor} actor's log (Ray's worker "
            "logs under /tmp/ray/session_latest/logs); run with -v to see vLLM's own lines"
        )
    return RlsimError(f"vLLM's engine failed while {doing}: {cause} ({folder} {policy_dir}); {advice}")
