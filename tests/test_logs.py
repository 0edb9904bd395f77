"""rlsim's logging set-up: one stderr format, -v in either position, the flag inherited by child processes."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from rlsim import logs
from rlsim.cli.main import build_parser, main


@pytest.fixture
def rlsim_logger(monkeypatch: pytest.MonkeyPatch) -> Iterator[logging.Logger]:
    """The ``rlsim`` logger, put back as it was afterwards; RLSIM_VERBOSE unset for the test."""
    monkeypatch.delenv(logs.VERBOSE_ENV, raising=False)
    root = logging.getLogger("rlsim")
    saved = (root.handlers[:], root.level, root.propagate)
    yield root
    root.handlers[:], root.level, root.propagate = saved


def test_lines_name_the_part_and_the_level(rlsim_logger: logging.Logger, capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure()
    logging.getLogger("rlsim.serve.app").info("ready")
    logging.getLogger("rlsim.serve.runner").warning("reachable from other machines")
    logging.getLogger("rlsim.loop.roles.reward_stage").error("server died")
    logging.getLogger("rlsim").info("top")
    logging.getLogger("rlsim.models.builtin").debug("hidden without -v")
    assert capsys.readouterr().err.splitlines() == [
        "rlsim serve: ready",
        "rlsim serve: warning: reachable from other machines",
        "rlsim loop: error: server died",
        "rlsim: top",
    ]


def test_configure_twice_keeps_one_handler(rlsim_logger: logging.Logger, capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure()
    logs.configure()
    logging.getLogger("rlsim.x").info("once")
    assert capsys.readouterr().err == "rlsim x: once\n"


def test_verbose_shows_debug_and_reaches_child_processes(
    rlsim_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not logs.verbose()
    logs.configure(verbose_flag=True)
    # Ray workers and the scoring server read the flag from the environment they inherit.
    assert logs.verbose() and rlsim_logger.level == logging.DEBUG
    logging.getLogger("rlsim.models.builtin").debug("shown with -v")
    assert capsys.readouterr().err == "rlsim models: shown with -v\n"


VERBOSE_ARGVS = [["-v", "verify"], ["verify", "--json", "o.json", "-v"], ["verify", "--verbose", "--json", "o.json"]]


@pytest.mark.parametrize("argv", VERBOSE_ARGVS)
def test_verbose_flag_before_or_after_the_command(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).verbose is True


def test_no_flag_means_not_verbose() -> None:
    assert build_parser().parse_args(["verify"]).verbose is False


def test_error_message_stays_one_line_on_stderr(
    rlsim_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", "--runtimes", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rlsim verify: error:")
