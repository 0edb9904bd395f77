"""A bank of real programs with their own checks, made from the doctests of what is installed.

A random-weight policy writes no code, so a sandbox reward that ran the response would run nothing and cost
nothing. The bank stands in for the response: each program runs one docstring's examples from an installed
module (the standard library's ``statistics``, ``difflib``, ``_pydecimal``, ...; sympy's number theory,
polynomials and permutations, installed with torch) with ``doctest``, and passes when every example prints what
its docstring says, the way a code task's unit tests pass or fail. A response is given the program whose
examples are nearest its own length in characters, so a longer response costs more, as longer code would.

The bank is built once per interpreter and package versions (each candidate is run once in the sandbox and kept
only if it passes there) and cached as JSON under rlsim's cache folder.
"""

from __future__ import annotations

import ast
import bisect
import importlib.metadata
import importlib.util
import json
import sys
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from rlsim.errors import RlsimError
from rlsim.io import atomic_write_json
from rlsim.paths import cache_dir

DEFAULT_MODULES = (
    "statistics", "difflib", "_pydecimal", "collections", "fractions", "typing", "json",
    "sympy.ntheory.factor_", "sympy.core.numbers", "sympy.polys.polytools", "sympy.combinatorics.permutations",
)  # fmt: skip
PER_MODULE = 8  # candidates per module, spread over its docstrings' sizes

PROGRAM = """\
import doctest, importlib, sys
module = importlib.import_module({module!r})
test = doctest.DocTestParser().get_doctest({text!r}, dict(vars(module)), {name!r}, None, 0)
runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
runner.run(test, out=sys.stderr.write)
sys.exit(1 if runner.failures else 0)
"""


@dataclass(frozen=True)
class BankProgram:
    """One program: ``name`` (module.qualname of the docstring), ``size`` (characters of its examples),
    ``source`` (the Python to run), ``seconds`` (one sandboxed run when the bank was built)."""

    name: str
    size: int
    source: str
    seconds: float


class ProgramBank:
    """Programs ordered by size; ``pick(length)`` gives the one nearest ``length`` characters."""

    def __init__(self, programs: Sequence[BankProgram]) -> None:
        if not programs:
            raise RlsimError("the program bank is empty: no candidate doctest passed in the sandbox")
        self.programs = sorted(programs, key=lambda p: (p.size, p.name))
        self._sizes = [p.size for p in self.programs]

    def pick(self, length: int) -> BankProgram:
        i = bisect.bisect_left(self._sizes, length)
        if i == len(self._sizes) or (i > 0 and length - self._sizes[i - 1] <= self._sizes[i] - length):
            i -= 1
        return self.programs[max(i, 0)]


def candidates(modules: Sequence[str] = DEFAULT_MODULES, per_module: int = PER_MODULE) -> list[BankProgram]:
    """Doctest programs from the docstrings of ``modules`` (read with ``ast``, nothing imported here)."""
    out = []
    for module in modules:
        docs = _docstrings_with_examples(module)
        step = max(1, len(docs) // per_module)
        for name, text, size in sorted(docs, key=lambda d: d[2])[::step][:per_module]:
            out.append(BankProgram(name, size, PROGRAM.format(module=module, text=text, name=name), 0.0))
    return out


def _docstrings_with_examples(module: str) -> list[tuple[str, str, int]]:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return []
    tree = ast.parse(Path(spec.origin).read_text())
    found = []
    for node, qualname in _named_nodes(tree, module):
        doc = ast.get_docstring(node, clean=False)
        if doc and ">>>" in doc:
            size = sum(len(line) for line in doc.splitlines() if line.strip().startswith((">>>", "...")))
            found.append((qualname, doc, size))
    return found


def _named_nodes(tree: ast.Module, module: str):
    yield tree, module
    stack = [(node, f"{module}.{node.name}") for node in tree.body if hasattr(node, "name")]
    while stack:
        node, qualname = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node, qualname
        if isinstance(node, ast.ClassDef):
            stack += [(child, f"{qualname}.{child.name}") for child in node.body if hasattr(child, "name")]


def build_bank(
    run: Callable[[str], tuple[bool, float]],
    modules: Sequence[str] = DEFAULT_MODULES,
    workers: int = 2,
    cache: Path | None = None,
) -> ProgramBank:
    """The bank: cached, or built by running each candidate once with ``run`` (source -> passed, seconds)."""
    path = cache or bank_cache_path(modules)
    if path.exists():
        return ProgramBank([BankProgram(**p) for p in json.loads(path.read_text())["programs"]])
    pool = candidates(modules)
    with ThreadPoolExecutor(max(1, workers)) as ex:
        results = list(ex.map(lambda p: run(p.source), pool))
    kept = [BankProgram(p.name, p.size, p.source, round(s, 4)) for p, (ok, s) in zip(pool, results, strict=True) if ok]
    bank = ProgramBank(kept)
    atomic_write_json(path, {"modules": list(modules), "candidates": len(pool),
                             "programs": [asdict(p) for p in bank.programs]})  # fmt: skip
    return bank


def bank_cache_path(modules: Sequence[str]) -> Path:
    """One file per interpreter, package versions and module list (a new sympy rebuilds the bank)."""
    versions = []
    for dist in ("sympy",):
        try:
            versions.append(f"{dist}{importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"no-{dist}")
    key = zlib.crc32(",".join(modules).encode())
    python = f"py{sys.version_info[0]}{sys.version_info[1]}"
    return cache_dir() / "program_bank" / f"{python}-{'-'.join(versions)}-{key}.json"
