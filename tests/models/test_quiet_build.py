"""Building a MiniLM reward model says in one line what it built; transformers' load report only with -v.

Built here: ``minilm-rm-random`` (same encoder and load report as ``minilm-rm``, whose head training takes minutes)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlsim import logs
from rlsim.models.builtin import BUILTIN_REWARD_MODELS, materialise


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("RLSIM_CACHE", str(tmp_path))
    monkeypatch.setenv(logs.VERBOSE_ENV, "")
    root = logging.getLogger("rlsim")
    saved = (root.handlers[:], root.level, root.propagate)
    yield tmp_path
    root.handlers[:], root.level, root.propagate = saved


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(record.getMessage())


@pytest.fixture
def transformers_records() -> Iterator[_Records]:
    """What transformers logs, read at its logger: its own handler writes to whichever stderr it found first,
    which in a long pytest session is an earlier test's capture, out of capfd's sight."""
    handler = _Records()
    hf = logging.getLogger("transformers")
    hf.addHandler(handler)
    yield handler
    hf.removeHandler(handler)


def _build(capfd: pytest.CaptureFixture[str]) -> str:
    logs.configure()
    materialise("minilm-rm-random", BUILTIN_REWARD_MODELS["minilm-rm-random"])
    out, err = capfd.readouterr()
    return out + err


def test_build_is_one_line_without_verbose(
    fresh_cache: Path, capfd: pytest.CaptureFixture[str], transformers_records: _Records
) -> None:
    text = _build(capfd)
    assert not any("MISSING" in t for t in transformers_records.texts)
    assert "MISSING" not in text and "LOAD REPORT" not in text and "Writing model shards" not in text
    assert text.splitlines() == [
        "rlsim models: building minilm-rm-random: pretrained MiniLM encoder + seeded random scalar head (not trained)"
        f" -> {fresh_cache / 'models' / 'minilm-rm-random-v1'}"
    ]


def test_verbose_shows_transformers_load_report(
    fresh_cache: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    transformers_records: _Records,
) -> None:
    monkeypatch.setenv(logs.VERBOSE_ENV, "1")
    _build(capfd)
    assert any("classifier.weight" in t and "MISSING" in t for t in transformers_records.texts)
