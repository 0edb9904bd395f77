"""One worker of a ``CallPool``: imports ``module:function`` once, then answers calls over its stdin/stdout.

Run as ``python -m rlsim.rewards.call_worker MODULE:FUNCTION``. The protocol is one JSON object per line:
``{"i": 3, "args": [prompt, response]}`` in; ``{"i": 3, "value": 1.0}`` or ``{"i": 3, "error": "..."}`` out.
The first line out is ``{"ready": true}`` (or ``{"ready": false, "error": ...}`` when the target cannot be
loaded). The protocol runs on a private copy of stdout: the function's own prints go to stderr, so a chatty
reward function cannot corrupt an answer.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import sys
from typing import Any


def load_target(target: str) -> Any:
    """``module:function`` -> the callable; raises ValueError naming what is wrong."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{target!r} is not MODULE:FUNCTION (e.g. rlsim.rewards.math_check:score)")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # a user's module may raise anything while importing
        raise ValueError(f"cannot import {module_name!r} for {target!r}: {type(err).__name__}: {err}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"{module_name!r} has no callable {attr!r} (from {target!r})")
    return fn


def as_reward(value: Any) -> float:
    """A finite float from the function's return value, or ValueError naming what came back."""
    if isinstance(value, bool | int | float) and math.isfinite(float(value)):
        return float(value)
    raise ValueError(f"the reward function returned {value!r}; it must return a finite number")


def main(argv: list[str]) -> int:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the function's prints land in stderr, not in the protocol
    try:
        fn = load_target(argv[1])
    except ValueError as err:
        out.write(json.dumps({"ready": False, "error": str(err)}) + "\n")
        return 2
    out.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        call = json.loads(line)
        try:
            answer = {"i": call["i"], "value": as_reward(fn(*call["args"]))}
        except Exception as err:  # reported to the pool, which names the rollout and the function
            answer = {"i": call["i"], "error": f"{type(err).__name__}: {err}"}
        out.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
