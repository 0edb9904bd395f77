"""Which of rlsim's packages may not import what: one table, checked on the source (issue 24).

Each rule names a package (every module under it is checked), what it may not import (a name bans its submodules
too: ``torch`` bans ``torch.nn``; rlsim's own modules can be named), and how strictly:

- ``AT_LOAD``: not when the package is imported, neither directly nor through the module-level imports of the
  rlsim modules it imports; inside a function is fine (that is how the planner's measuring parts reach the loop).
- ``ANYWHERE``: not by any import statement in the package, inside functions and under ``if TYPE_CHECKING:``
  included, and not at load through other modules either.

The reading of the source is the one the cycle test uses (``tests/helpers/import_graph.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.helpers.import_graph import Imports, read, under, write_package

ROOT = Path(__file__).resolve().parents[1]

AT_LOAD, ANYWHERE = "at load", "anywhere"
GPU_STACK = ("torch", "vllm", "ray", "onnxruntime")
# What `rlsim --help` must not pay for (the measured HEAVY list of tests/test_deferred_imports.py, in short).
SLOW = (*GPU_STACK, "transformers", "onnx", "fastapi", "uvicorn", "scipy", "matplotlib", "sympy")


@dataclass(frozen=True)
class Rule:
    forbidden: tuple[str, ...]
    when: str
    exempt: tuple[str, ...] = ()  # modules (or packages) under the rule's package that the rule leaves out


RULES: dict[str, Rule] = {
    # The planner is plain Python: `rlsim plan` plans on a machine without the GPU stack, and never loads the
    # loop. Its measuring parts (measure.scorers, measure.loop_runner, measure.roles) reach the loop, torch and
    # Ray inside their functions only.
    "rlsim.planner": Rule((*GPU_STACK, "rlsim.loop"), AT_LOAD),
    # The loop drives the actors, not the reverse: even a lazy import would tie the actors to the loop's config
    # and bring back the circle loop/config.py <-> actors/placement.py once had.
    "rlsim.actors": Rule(("rlsim.loop",), ANYWHERE),
    # Scorers, batchers and generators are building blocks that run and test without Ray, and know nothing of
    # the loop or the actors that use them (STYLE.md). Nor does scoring know the server that runs its scorers:
    # the http runtime is a client of `rlsim serve` and reads the bodies from rlsim.http_schemas, which the
    # server writes them with (scoring <-> serve was a knot while those lived in rlsim/serve). Nor the fidelity
    # checks that judge its runtimes: the int8-mixed choice judges by rlsim.corpus.agreement, and verify, a judge,
    # lives in rlsim.fidelity (scoring <-> fidelity was a knot while verify lived in scoring and the layer
    # sensitivity in fidelity).
    "rlsim.scoring": Rule(("ray", "rlsim.actors", "rlsim.loop", "rlsim.serve", "rlsim.fidelity"), ANYWHERE),
    "rlsim.batching": Rule(("ray", "rlsim.actors", "rlsim.loop"), ANYWHERE),
    "rlsim.rollout": Rule(("ray", "rlsim.actors", "rlsim.loop"), ANYWHERE),
    # Ray lives in the actors and the loop that drives them, plus the two places that start a loop's Ray
    # session themselves: an experiment's session and the planner's measured loop runs.
    "rlsim": Rule(
        ("ray",),
        ANYWHERE,
        exempt=("rlsim.actors", "rlsim.loop", "rlsim.experiment.session", "rlsim.planner.measure.loop_runner"),
    ),
    # Hardware figures (FLOP counts, GEMM rates, peaks, CPU flags) are a leaf that the fingerprint, the benchmarks,
    # the metrics and the scoring runtimes all read; importing any of them back would tie them in a knot again
    # (fingerprint -> bench.gemm -> bench.peaks -> scoring once did).
    "rlsim.hardware": Rule(("rlsim.bench", "rlsim.metrics", "rlsim.scoring", "rlsim.fingerprint"), ANYWHERE),
    # The texts that models are trained on and runtimes are judged on, and the yardstick they are judged by
    # (corpus.agreement: metrics, pass rules): the reward head, the int8 calibration and mixed choice and the
    # fidelity checks all read the corpus, so it may read none of them (scoring <-> fidelity, models ->
    # fidelity -> scoring were the knots when the corpus and the metrics lived in rlsim/fidelity).
    "rlsim.corpus": Rule(("rlsim.scoring", "rlsim.models", "rlsim.fidelity"), ANYWHERE),
    # The three HTTP protocols' bodies, shared by the server and the http runtime's client: one definition that
    # depends on neither end.
    "rlsim.http_schemas": Rule(("rlsim.scoring", "rlsim.serve"), ANYWHERE),
    # `import rlsim` and `rlsim --help` stay fast: the GPU stack and the slow libraries load inside the backend
    # or command that needs them.
    "rlsim.cli": Rule(SLOW, AT_LOAD),
}


AT_LOAD_FIX = "import it inside the function that needs it, or cut the chain at its first link"
ANYWHERE_FIX = "move the code that needs it to a package the rule allows"


def broken_rules(root: Path, package: str, rules: dict[str, Rule]) -> list[str]:
    """One line per rule broken: ``file:line`` of the import, the rule, the chain of imports that breaks it, the fix."""
    imports = read(root, package)
    found = []
    for owner, rule in rules.items():
        modules = [m for m in imports.files if under(m, owner) and not any(under(m, e) for e in rule.exempt)]
        assert modules, f"the rule for {owner} names no module: a rule that checks nothing cannot fail"
        for bad, chain in sorted(imports.load_chains(modules, rule.forbidden).items()):
            where = _first_link(imports, chain)
            found.append(
                f"{where}: {owner} may not import {bad} ({rule.when}); at load: {' -> '.join(chain)}; {AT_LOAD_FIX}"
            )
        if rule.when != ANYWHERE:
            continue
        for module in modules:
            for site in imports.sites[module]:  # under TYPE_CHECKING too
                for name in sorted(
                    n for n in site.internal | site.external if any(under(n, b) for b in rule.forbidden)
                ):
                    where = imports.at(site.path, site.line)
                    found.append(f"{where}: {owner} may not import {name} (anywhere); {ANYWHERE_FIX}")
    return sorted(set(found))


def _first_link(imports: Imports, chain: list[str]) -> str:
    """``file:line`` of the load-time import by which ``chain[0]`` reaches ``chain[1]`` (the file alone when that
    is a parent package, which loads first without an import statement)."""
    path = imports.files[chain[0]]
    for site in imports.running(chain[0]):
        if not site.deferred and any(under(name, chain[1]) for name in site.internal | site.external):
            return imports.at(path, site.line)
    return str(path.relative_to(imports.root))


def test_rlsim_keeps_its_import_rules() -> None:
    found = broken_rules(ROOT, "rlsim", RULES)
    assert not found, "\n".join(found)


def test_the_rules_are_checked_through_the_packages_real_imports() -> None:
    # Were the walk to stop early, the test above would pass on anything: rlsim.workloads is reached only
    # through a planner module's module-level import, and the loop only inside the planner's functions.
    imports = read(ROOT, "rlsim")
    planner = [m for m in imports.files if under(m, "rlsim.planner")]
    chain = imports.load_chains(planner, ["rlsim.workloads"])["rlsim.workloads"]
    assert under(chain[0], "rlsim.planner") and chain[-1] == "rlsim.workloads"
    assert "rlsim.loop" not in imports.load_chains(planner, ["rlsim.loop"])
    deferred = {t for m in planner for s in imports.running(m) if s.deferred for t in s.internal}
    assert any(under(t, "rlsim.loop") for t in deferred)


def test_a_planted_import_is_caught_through_every_route(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/util.py": "import numpy\nimport torch.nn\n",
            "pkg/sim/__init__.py": "",
            "pkg/sim/direct.py": "class A:\n    import vllm\n",  # class bodies run at import
            "pkg/sim/absolute.py": "from pkg.util import helper\n",  # via another module
            "pkg/sim/relative.py": "try:\n    from .. import util\nexcept ImportError:\n    pass\n",
            "pkg/sim/lazy.py": "def f():\n    import ray\n",  # runs later: allowed at load
            "pkg/sim/typing_only.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import ray\n",
            "pkg/sim/loop_user.py": "from pkg.loop.config import RunConfig\n",
            "pkg/loop/__init__.py": "",
            "pkg/loop/config.py": "",
            "pkg/actors/__init__.py": '"""clean"""\nimport os\n',
            "pkg/actors/clean.py": "from pkg.placement import ResolvedPlacement\nimport pkg.looping\n",
            "pkg/actors/lazy.py": "def f():\n    from pkg.loop.config import RunConfig\n    return RunConfig\n",
            "pkg/actors/sub/__init__.py": "",
            "pkg/actors/sub/rel.py": "def f():\n    from ...loop import config\n",
            "pkg/actors/typed.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg.loop import config\n",
            "pkg/actors/whole.py": "def f():\n    from pkg import loop\n",
            "pkg/placement.py": "",
            "pkg/looping.py": "",
        },
    )
    rules = {
        "pkg.sim": Rule(("torch", "ray", "vllm", "pkg.loop"), AT_LOAD),
        "pkg.actors": Rule(("pkg.loop",), ANYWHERE),
    }
    found = [line.rpartition("; ")[0] for line in broken_rules(tmp_path, "pkg", rules)]
    assert found == [
        "pkg/actors/lazy.py:2: pkg.actors may not import pkg.loop.config (anywhere)",
        "pkg/actors/sub/rel.py:2: pkg.actors may not import pkg.loop.config (anywhere)",
        "pkg/actors/typed.py:3: pkg.actors may not import pkg.loop.config (anywhere)",
        "pkg/actors/whole.py:2: pkg.actors may not import pkg.loop (anywhere)",
        "pkg/sim/absolute.py:1: pkg.sim may not import torch (at load); at load: pkg.sim.absolute -> pkg.util -> torch",
        "pkg/sim/direct.py:2: pkg.sim may not import vllm (at load); at load: pkg.sim.direct -> vllm",
        "pkg/sim/loop_user.py:1: pkg.sim may not import pkg.loop (at load); at load: pkg.sim.loop_user -> pkg.loop",
    ]  # pkg.actors.clean imports pkg.looping, not pkg.loop; pkg.sim's lazy and typing-only ray never load
    # pkg.sim.relative reaches torch too, through the same pkg.util (one chain per forbidden name).
    (tmp_path / "pkg" / "sim" / "absolute.py").unlink()
    assert "pkg.sim.relative -> pkg.util -> torch" in "\n".join(broken_rules(tmp_path, "pkg", rules))


def test_a_forbidden_import_planted_in_a_copy_of_rlsim_is_caught(tmp_path: Path) -> None:
    copy = tmp_path / "rlsim"
    for path in (ROOT / "rlsim").rglob("*.py"):
        target = copy / path.relative_to(ROOT / "rlsim")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    # (file, what is planted at its end, what the failure must say): one import each rule forbids.
    plants = [
        ("planner/sim/events.py", "from rlsim.loop.config import RunConfig",
         "rlsim.planner may not import rlsim.loop (at load)"),
        ("batching/base.py", "def _f():\n    import ray", "may not import ray (anywhere)"),
        ("hardware/gemm.py", "def _g():\n    from rlsim.bench.scoring_config import Cell",
         "rlsim.hardware may not import rlsim.bench.scoring_config"),
        ("corpus/text_source.py", "from rlsim.scoring import SCORERS", "rlsim.corpus may not import rlsim.scoring"),
        ("scoring/http_protocols.py", "def _h():\n    from rlsim.serve.settings import ServeSettings",
         "rlsim.scoring may not import rlsim.serve.settings"),
        ("scoring/int8_mixed_scorers.py", "def _i():\n    from rlsim.fidelity import check",
         "rlsim.scoring may not import rlsim.fidelity"),
        ("corpus/agreement.py", "def _j():\n    from rlsim.fidelity.check import runtime_fidelity",
         "rlsim.corpus may not import rlsim.fidelity"),
        ("http_schemas.py", "from rlsim.serve.metrics import CONTENT_TYPE",
         "rlsim.http_schemas may not import rlsim.serve"),
    ]  # fmt: skip
    for file, code, _ in plants:
        (copy / file).write_text((copy / file).read_text() + "\n" + code + "\n")
    found = broken_rules(tmp_path, "rlsim", RULES)
    for file, _, message in plants:
        assert any(line.startswith(f"rlsim/{file}:") and message in line for line in found), (file, found)
