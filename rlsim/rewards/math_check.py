"""rlsim's built-in math answer checker: ``score(prompt, response) -> 1.0 | 0.0``.

What rule-based verifiers for math do (verl ``verl/utils/reward_score/math_verify.py`` wraps the math-verify
package; NeMo-RL ``nemo_rl/environments/math_environment.py`` calls it in a worker pool): take the response's
final answer (the last ``\\boxed{...}``, else the last number), parse it and the reference into sympy and test
them for equivalence, not string equality (``1/2`` = ``0.5`` = ``\\frac{1}{2}``).

The reference comes from the prompt: the value of the last arithmetic expression in it (``What is 3/4 + 5/6?``
-> 19/12), so prompts that hold a problem are checked end to end. rlsim's own workloads are filler text with
no problem in them; there the response is still parsed (the part of the cost that grows with its length) and
the reward is 0.
"""

from __future__ import annotations

import re
from functools import lru_cache

NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?")
EXPRESSION = re.compile(r"[\d(][\d\s.+\-*/^()]*[\d)]")
MAX_CHARS = 200  # an "answer" longer than this is not an answer; sympy would only spend time on it


def score(prompt: str, response: str) -> float:
    answer = final_answer(response)
    parsed = _parse(answer) if answer else None
    expected = reference_answer(prompt)
    if parsed is None or expected is None:
        return 0.0
    return 1.0 if equivalent(parsed, expected) else 0.0


def final_answer(response: str) -> str | None:
    """The last ``\\boxed{...}`` (braces balanced), else the last number in ``response``."""
    start = response.rfind("\\boxed{")
    if start >= 0:
        depth, i = 1, start + len("\\boxed{")
        for j in range(i, len(response)):
            depth += {"{": 1, "}": -1}.get(response[j], 0)
            if depth == 0:
                return response[i:j]
    numbers = NUMBER.findall(response)
    return numbers[-1] if numbers else None


def reference_answer(prompt: str):
    """The exact value of the last arithmetic expression (with an operator) in ``prompt``, or None."""
    for text in reversed(EXPRESSION.findall(prompt)):
        if any(op in text.strip().lstrip("-") for op in "+-*/^"):
            value = _parse(text)
            if value is not None:
                return value
    return None


def equivalent(a, b) -> bool:
    import sympy

    try:
        return bool(sympy.simplify(a - b) == 0)
    except (TypeError, ValueError, AttributeError, RecursionError):
        return False


@lru_cache(maxsize=4096)
def _parse(text: str):
    """``text`` (plain or simple LaTeX) as an exact sympy expression, or None when it does not parse."""
    from sympy.parsing.sympy_parser import parse_expr

    text = text.strip().strip("$").replace(",", "")
    if not text or len(text) > MAX_CHARS:
        return None
    text = re.sub(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}", r"((\1)/(\2))", text)
    text = text.replace("\\cdot", "*").replace("\\times", "*").replace("^", "**").replace("\\left", "")
    text = text.replace("\\right", "").replace("{", "(").replace("}", ")")
    try:
        return parse_expr(text, evaluate=True, local_dict={}, global_dict=_SAFE_GLOBALS())
    except Exception:  # sympy's parser raises many kinds (SyntaxError, TokenError, TypeError, ...)
        return None


@lru_cache(maxsize=1)
def _SAFE_GLOBALS() -> dict:  # noqa: N802 - a constant computed once
    import sympy

    # numbers and arithmetic only: parse_expr evaluates Python, so no builtins and no names beyond these
    return {"__builtins__": {}, "Integer": sympy.Integer, "Float": sympy.Float, "Rational": sympy.Rational,
            "Symbol": sympy.Symbol, "sqrt": sympy.sqrt, "pi": sympy.pi}  # fmt: skip
