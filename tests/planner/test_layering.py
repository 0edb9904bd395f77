"""The planner is plain Python: importing it and planning loads no torch, Ray, vLLM, onnxruntime or ``rlsim.loop``.

The import rule itself is checked on the source in ``tests/test_import_rules.py``; this runs the real thing once,
which also catches a module loaded by name (a registry's built-ins) that no import statement shows.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.test_import_rules import RULES

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = RULES["rlsim.planner"].forbidden


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
