"""LineProgress: plain progress lines where rich cannot draw a live bar (files, CI logs)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import BarColumn, TextColumn

from rlsim.progress import LineProgress


def _run(console: Console, disable: bool = False) -> None:
    with LineProgress(TextColumn("{task.description}"), BarColumn(), console=console, disable=disable) as bar:
        task = bar.add_task("starting", total=3)
        bar.update(task, description="repeat 1: eager")
        bar.advance(task)
        bar.update(task, description="repeat 1: ort")
        bar.advance(task)  # same description, within the interval: no new line
        bar.advance(task)


def test_non_terminal_console_gets_one_line_per_description() -> None:
    buf = io.StringIO()
    _run(Console(file=buf, force_terminal=False, width=100))
    lines = [line for line in buf.getvalue().splitlines() if line.startswith("[")]
    assert [line.split("] ", 1)[1] for line in lines] == ["0/3 repeat 1: eager", "1/3 repeat 1: ort"]


def test_terminal_and_disabled_consoles_get_no_plain_lines() -> None:
    for console, disable in (
        (Console(file=io.StringIO(), force_terminal=True), False),
        (Console(file=io.StringIO(), force_terminal=False), True),
    ):
        _run(console, disable)
        assert "] 0/3 repeat" not in console.file.getvalue()


def test_long_descriptions_stay_on_one_line() -> None:
    buf = io.StringIO()
    long = "starting scorers: " + ", ".join(["eager", "compile", "ort", "ort-int8", "native", "native-int8", "http"])
    with LineProgress(
        TextColumn("{task.description}"), console=Console(file=buf, force_terminal=False, width=40)
    ) as bar:
        bar.add_task("x", total=1)
        bar.update(0, description=long)  # type: ignore[arg-type]
    assert any(line.endswith(long) for line in buf.getvalue().splitlines())


def test_a_piped_console_keeps_a_wide_table_whole():
    # rlsim plan's table has 14 columns; piped, rich used to cut it to 80 columns (`run…`, `max…`).
    import io

    from rich.table import Table

    from rlsim.progress import PIPED_WIDTH, make_console

    console = make_console()
    assert not console.is_terminal and console.width == PIPED_WIDTH
    table = Table(*[f"column_{i}_with_a_long_name" for i in range(14)])
    table.add_row(*[f"{i * 1234.5:,.1f} s" for i in range(14)])
    console.file = io.StringIO()
    console.print(table)
    text = console.file.getvalue()
    assert "…" not in text and "column_13_with_a_long_name" in text and "16,048.5 s" in text
