"""``rlsim`` imports only the module of the command it runs (``rlsim/cli/main.py``).

Importing all nine ``*_cmd`` modules costs about 0.25 s (their configs' pydantic models), which ``rlsim --help`` and
every single command would otherwise pay; the full parser (``build_parser()``) still has every command's arguments.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rlsim.cli.main import SUBCOMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]

LOADED = "sorted(m for m in sys.modules if m.startswith('rlsim.cli.') and m.endswith('_cmd'))"


def test_help_imports_no_command_module_and_a_command_only_its_own() -> None:
    code = (
        "import contextlib, io, sys\n"
        "from rlsim.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['--help']) == 0\n"
        f"print({LOADED})\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['-v', 'run', '--help']) == 0\n"
        f"print({LOADED})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["[]", "['rlsim.cli.run_cmd']"]


def test_the_full_parser_has_every_commands_arguments() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert list(sub.choices) == list(SUBCOMMANDS)
    for name, subparser in sub.choices.items():
        assert subparser.get_default("func") is not None or subparser._subparsers is not None, name
