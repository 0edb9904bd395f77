"""An import inside a function is there to defer something heavy, and for nothing else (issue 24).

A deferred import hides a dependency from whoever reads the top of the file and can hide a cycle; it earns that
only by keeping ``import rlsim`` and ``rlsim --help`` fast, or by letting a module load where an optional piece is
missing. So a function-level import (``if TYPE_CHECKING:`` ones never run and do not count) must load something on
HEAVY, directly or through an rlsim module whose load-time imports reach it, or sit in a ``try`` that catches
ImportError (an optional piece, reported with the fix by the code around it). Anything else goes to the top.

An import that an import rule (``tests/test_import_rules.py``) forbids a package to load at import time is deferred
for that reason, whatever it costs: the planner uses the loop's config inside the functions that run real loops.

HEAVY is what importing costs at least ~40 ms that ``rlsim --help`` does not already pay, measured with
``python -X importtime -c "import X"`` (best of 3, cumulative) on the 2-core dev container (2026-12):

=====================  ========  ====================================================
torch                   1600 ms   trainer, eager/compile scorers (an extra, not a dependency)
vllm                    3600 ms   rollout (an extra)
transformers            1000 ms   tokenizers, HF models
onnx                    1000 ms   export, quantization (1200 ms for onnx.numpy_helper)
onnxruntime              150 ms   ORT scorers
ray                      370 ms   actors and the loop driver only
fastapi, uvicorn     280, 90 ms   the reward server
scipy                   880 ms   scipy.stats (146 ms for bare scipy)
matplotlib              530 ms   matplotlib.pyplot (240 ms bare), plots only
sympy                   360 ms   the math verifier
httpx                   155 ms   the http reward client
rich                  45-60 ms   progress bars and tables (--help loads none of rich)
safetensors.torch                loads torch
rlsim._native                    the compiled engine, absent from an unbuilt checkout
=====================  ========  ====================================================

Not heavy, so never deferred: numpy (120 ms, but ``rlsim --help`` loads it anyway through rlsim.scoring.base),
pydantic (50 ms, likewise), importlib.metadata (57 ms, which pydantic loads), pyyaml (20 ms), psutil (22 ms),
safetensors.numpy (4 ms) and the rest of the standard library.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.import_graph import Imports, ImportSite, read, under, write_package
from tests.test_import_rules import AT_LOAD, RULES, Rule

ROOT = Path(__file__).resolve().parents[1]

HEAVY = (
    "torch",
    "vllm",
    "transformers",
    "onnx",
    "onnxruntime",
    "ray",
    "fastapi",
    "uvicorn",
    "scipy",
    "matplotlib",
    "sympy",
    "httpx",
    "rich",
    "safetensors.torch",
    "rlsim._native",
)

# (importer, imported) -> why the import stays inside a function though it loads nothing heavy and no import rule
# asks for it. Keep this short: a cycle is untied by moving what both modules share to a leaf module, not here.
ALLOWED: dict[tuple[str, str], str] = {
    # `import rlsim` takes 3 ms; reading the version from the installed metadata (57 ms) waits for __version__.
    ("rlsim", "importlib.metadata"): "rlsim.__version__ is read on first use",
}


def _kept_out_at_load(importer: str, imported: str, rules: dict[str, Rule]) -> bool:
    """Whether an AT_LOAD rule forbids ``importer``'s package to load ``imported`` at import time."""
    return any(
        rule.when == AT_LOAD
        and under(importer, owner)
        and not any(under(importer, e) for e in rule.exempt)
        and any(under(imported, bad) for bad in rule.forbidden)
        for owner, rule in rules.items()
    )


def _optional_sites(imports: Imports) -> set[tuple[str, int]]:
    """(module, line) of imports inside a ``try`` that catches ImportError: an optional piece."""
    found = set()
    for module, path in imports.files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Try) and any(_catches_import_error(h.type) for h in node.handlers):
                for stmt in node.body:
                    for inner in ast.walk(stmt):
                        if isinstance(inner, (ast.Import, ast.ImportFrom)):
                            found.add((module, inner.lineno))
    return found


def _catches_import_error(kind: ast.expr | None) -> bool:
    names = kind.elts if isinstance(kind, ast.Tuple) else [kind]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names)


def needless_deferred_imports(
    root: Path,
    package: str,
    heavy: tuple[str, ...] = HEAVY,
    allowed: dict[tuple[str, str], str] | None = None,
    rules: dict[str, Rule] | None = None,
) -> list[str]:
    """One line per function-level import that defers nothing heavy the importing module does not already load at
    import time: ``file:line``, what it imports, the fix."""
    allowed = ALLOWED if allowed is None else allowed
    rules = RULES if rules is None else rules
    imports = read(root, package)
    optional = _optional_sites(imports)
    memo: dict[str, set[str]] = {}

    def heavy_at_load(name: str) -> set[str]:
        """The HEAVY names importing ``name`` loads (``name`` itself where it is one)."""
        if name not in memo:
            memo[name] = {h for h in heavy if under(name, h)} or set(imports.load_chains([name], heavy))
        return memo[name]

    found = []
    for module in imports.files:
        loaded = heavy_at_load(module)
        for site in imports.running(module):
            if not site.deferred or (module, site.line) in optional:
                continue
            light = sorted(
                name
                for name in site.external | site.internal
                if not heavy_at_load(name) - loaded
                and (module, name) not in allowed
                and not (name in site.internal and _kept_out_at_load(module, name, rules))
            )
            if light:
                found.append(_explain(imports, site, light))
    return found


def _explain(imports: Imports, site: ImportSite, light: list[str]) -> str:
    return (
        f"{imports.at(site.path, site.line)}: {', '.join(light)} imported inside a function loads nothing heavy "
        f"that {site.module} does not load at import already; move the import to the top of the file (if that "
        "makes a cycle, move what the two modules share to a leaf module)"
    )


def test_every_function_level_import_defers_something_heavy() -> None:
    found = needless_deferred_imports(ROOT, "rlsim")
    assert not found, "\n".join(found)


def test_the_allow_list_names_only_imports_that_exist() -> None:
    imports = read(ROOT, "rlsim")
    pairs = {(m, t) for m in imports.files for s in imports.running(m) if s.deferred for t in s.internal | s.external}
    assert set(ALLOWED) <= pairs, set(ALLOWED) - pairs


def test_a_planted_needless_deferred_import_is_caught(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/light.py": "import json\n",
            "pkg/gpu.py": "import torch\n",
            "pkg/via_gpu.py": "from pkg.gpu import x\n",  # heavy at load, one step away
            "pkg/user.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from pkg.light import y\n"  # never runs: not counted
                "def f():\n"
                "    from pkg.light import z\n"  # line 5: defers nothing
                "    from pkg.via_gpu import w\n"
                "    import torch.nn\n"
                "    import json\n"  # line 8: the standard library is never worth deferring
                "    try:\n"
                "        import optional_thing\n"  # an optional piece with its own error
                "    except ImportError:\n"
                "        pass\n"
                "class A:\n"
                "    import os\n"  # class bodies run at load: not deferred
                "    def g(self):\n"
                "        from . import light\n"  # line 16
            ),
            "pkg/allowed.py": "def f():\n    from pkg import light\n",
            "pkg/torch_user.py": "import torch\ndef f():\n    import torch.nn\n    from pkg import via_gpu\n",  # loaded
            "pkg/plain/__init__.py": "",
            "pkg/plain/user.py": "def f():\n    from pkg.light import z\n",  # a rule keeps pkg.light out at load
        },
    )
    rules = {"pkg.plain": Rule(("pkg.light",), AT_LOAD)}
    found = needless_deferred_imports(tmp_path, "pkg", ("torch",), {("pkg.allowed", "pkg.light"): "a plug-in"}, rules)
    assert [line.split(" imported")[0] for line in found] == [
        "pkg/torch_user.py:3: torch.nn",
        "pkg/torch_user.py:4: pkg.via_gpu",
        "pkg/user.py:5: pkg.light",
        "pkg/user.py:8: json",
        "pkg/user.py:16: pkg.light",
    ]
    assert "move the import to the top of the file" in found[0]
    # Without the allow-list entry and the rule, those two are reported too.
    found = needless_deferred_imports(tmp_path, "pkg", ("torch",), {}, {})
    assert {"pkg/allowed.py:2: pkg.light", "pkg/plain/user.py:2: pkg.light"} <= {f.split(" imported")[0] for f in found}
