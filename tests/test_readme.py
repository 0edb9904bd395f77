"""The README is a front door that stays true: short, a map naming every module, commands that exist (issue 24).

What is checked here is what goes stale silently when code moves: a module the map does not name (or names after
it is gone), a command or flag in the table that the CLI no longer accepts, a link to a page or file that moved.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from rlsim.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 250


def _section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def _table_first_cells(section: str) -> list[str]:
    """The first cell of every body row of the Markdown table(s) in a section, backticks removed."""
    cells = []
    for line in section.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            cells.append(line.split("|")[1].strip().strip("`"))
    return cells[1:] if cells else cells  # drop the header row


def _modules_on_disk() -> set[str]:
    package = ROOT / "rlsim"
    subpackages = {f"rlsim/{p.parent.name}/" for p in package.glob("*/__init__.py")}
    top_level = {f"rlsim/{p.name}" for p in package.glob("*.py") if p.name != "__init__.py"}
    return subpackages | top_level


def test_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= MAX_LINES, f"README.md is {lines} lines; move a subject to docs/ (limit {MAX_LINES})"


def test_map_names_every_module_and_only_existing_ones():
    named = set(_table_first_cells(_section(README.read_text(), "Map of the code")))
    on_disk = _modules_on_disk()
    assert not on_disk - named, f"modules missing from the README map: {sorted(on_disk - named)}"
    missing = sorted(name for name in named if not (ROOT / name).exists())
    assert not missing, f"the README map names paths that do not exist: {missing}"


def test_map_comes_before_the_subjects():
    text = README.read_text()
    assert text.index("## Map of the code") < text.index("## Commands") < text.index("## Documentation")


def _command_rows() -> list[tuple[str, str]]:
    rows = []
    for line in _section(README.read_text(), "Commands").splitlines():
        cells = [cell.strip() for cell in line.split("|")[1:-1]]
        if len(cells) == 3 and cells[0].startswith("`rlsim"):
            rows.append((cells[0].strip("`"), cells[2].strip("`")))
    return rows


def test_commands_table_is_there():
    assert len(_command_rows()) >= 9


@pytest.mark.parametrize(("command", "example"), _command_rows())
def test_every_command_in_the_table_exists_and_its_example_parses(command, example):
    parser = build_parser()
    words = shlex.split(command)[1:]
    subcommands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert words[0] in subcommands, f"`{command}` is in the README but not a subcommand of rlsim"
    assert example.startswith(command), f"the example for `{command}` runs something else: {example}"
    try:
        args = parser.parse_args(shlex.split(example)[1:])
    except SystemExit as stop:  # argparse refuses an unknown flag or subcommand with exit 2
        pytest.fail(f"the README's example `{example}` does not parse (exit {stop.code})")
    assert args.command == words[0]


def _relative_links(path: Path) -> list[str]:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text())
    return [link for link in links if not re.match(r"[a-z]+://", link)]


@pytest.mark.parametrize("page", [README, *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_links_resolve(page):
    broken = [link for link in _relative_links(page) if not (page.parent / link).exists()]
    assert not broken, f"{page.relative_to(ROOT)} links to files that do not exist: {broken}"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / link).resolve() for link in _relative_links(README)}
    unlinked = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def test_the_make_targets_the_readme_names_exist():
    makefile = (ROOT / "Makefile").read_text()
    for target in re.findall(r"^make ([a-z-]+)", README.read_text(), flags=re.M):
        assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), f"README names `make {target}`"
