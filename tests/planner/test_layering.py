"""The planner is plain Python: no torch, Ray, vLLM or ``rlsim.loop`` when it is imported.

Parts that run real work (``measure.scorers``, ``measure.loop_runner``) reach those only
through imports inside their functions, which the check leaves alone.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.layering import forbidden_imports

ROOT = Path(__file__).resolve().parents[2]
PLANNER = ROOT / "rlsim" / "planner"
FORBIDDEN = ("torch", "ray", "vllm", "onnxruntime", "rlsim.loop")


def test_planner_imports_nothing_heavy_at_module_level() -> None:
    assert forbidden_imports(PLANNER, FORBIDDEN) == []


def test_the_check_follows_the_planners_real_imports() -> None:
    # Were the walk to stop early, the test above would pass on anything; rlsim.workloads is reached
    # only through a planner module's rlsim-internal import, and rlsim.loop only inside functions.
    assert forbidden_imports(PLANNER, ["rlsim.workloads"]) == ["rlsim.planner.spec.workload -> rlsim.workloads"]
    assert forbidden_imports(PLANNER, ["rlsim.rollout"]) == []  # predict imports it inside a function


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_a_planted_import_is_caught_through_every_route(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/util.py": "import numpy\nimport torch.nn\n",
            "pkg/sim/__init__.py": "",
            "pkg/sim/direct.py": "class A:\n    import vllm\n",  # class bodies run at import
            "pkg/sim/absolute.py": "from pkg.util import helper\n",  # via another module
            "pkg/sim/relative.py": "try:\n    from .. import util\nexcept ImportError:\n    pass\n",
            "pkg/sim/lazy.py": "def f():\n    import ray\n",  # runs later: allowed
            "pkg/sim/typing_only.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import ray\n",
            "pkg/sim/loop_user.py": "from pkg.loop.config import RunConfig\n",
            "pkg/loop/__init__.py": "",
            "pkg/loop/config.py": "",
        },
    )
    chains = forbidden_imports(tmp_path / "pkg" / "sim", ["torch", "ray", "vllm", "pkg.loop"])
    assert chains == [
        "pkg.sim.absolute -> pkg.util -> torch",
        "pkg.sim.direct -> vllm",
        "pkg.sim.loop_user -> pkg.loop",
    ]
    # pkg.sim.relative reaches torch too, through the same pkg.util (one chain per forbidden module).
    (tmp_path / "pkg" / "sim" / "absolute.py").unlink()
    assert "pkg.sim.relative -> pkg.util -> torch" in forbidden_imports(tmp_path / "pkg" / "sim", ["torch"])


def test_a_forbidden_import_planted_in_a_copy_of_the_planner_is_caught(tmp_path: Path) -> None:
    copy = tmp_path / "rlsim"
    shutil.copytree(ROOT / "rlsim", copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    events = copy / "planner" / "sim" / "events.py"
    events.write_text(events.read_text() + "\nfrom rlsim.loop.config import RunConfig\n")
    chains = forbidden_imports(copy / "planner", FORBIDDEN)
    assert chains and all(c.endswith("rlsim.loop") or ".loop." in c for c in chains)
    assert "rlsim.planner.sim.events -> rlsim.loop" in chains


def test_importing_the_planner_and_planning_loads_no_heavy_module() -> None:
    cpu_config = ROOT / "configs" / "cluster_cpu_small.yaml"
    code = (
        "import pkgutil, importlib, sys; import rlsim.planner as p; from rlsim.cli.main import main; "
        "[importlib.import_module(m.name) for m in pkgutil.walk_packages(p.__path__, 'rlsim.planner.')]; "
        f"assert main(['plan', {str(cpu_config)!r}, '--set', 'search.steps=1', '--set', 'simulation.steps=1']) == 0; "
        f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]; "
        "assert not bad, bad"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
