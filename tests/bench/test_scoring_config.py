"""Grid construction and every bad-input check of ``rlsim bench scoring``, before anything runs."""

from __future__ import annotations

import dataclasses
import re

import pytest

from rlsim.bench import scoring_config
from rlsim.bench.scoring_config import BenchScoringConfig, Cell, grid_cells
from rlsim.cli.main import main
from rlsim.config_loader import validate
from rlsim.errors import ConfigError, RlsimError
from rlsim.scoring.base import SCORERS, RuntimeInfo


def test_grid_has_sizes_for_sized_batchers_and_budgets_for_token_budget() -> None:
    cfg = BenchScoringConfig(runtimes=["eager"], batch_sizes=[8, 32], budgets=[4096], baseline="eager/fixed/32")
    labels = [c.label for c in grid_cells(cfg)]
    assert labels == ["eager/fixed/8", "eager/fixed/32", "eager/sorted/8", "eager/sorted/32", "eager/token-budget/4096"]


def test_baseline_outside_grid_is_added_first() -> None:
    cfg = BenchScoringConfig(runtimes=["eager"], batchers=["sorted"], batch_sizes=[16])
    cells = grid_cells(cfg)
    assert cells[0] == Cell("eager", "fixed", batch_size=32) and len(cells) == 2


def test_cell_parse_round_trips() -> None:
    assert Cell.parse("ort/token-budget/8192") == Cell("ort", "token-budget", token_budget=8192)
    assert Cell.parse("eager/sorted/8").label == "eager/sorted/8"
    with pytest.raises(RlsimError, match="RUNTIME/BATCHER/SIZE"):
        Cell.parse("eager/sorted")


def test_every_bad_setting_is_listed_together() -> None:
    data = {"runtimes": ["eager", "warp-drive"], "batch_sizes": [0, 8], "budgets": [-5], "repeats": 1,
            "batchers": ["fixed", "dynamic"], "baseline": "nonsense"}  # fmt: skip
    with pytest.raises(ConfigError) as err:
        validate(BenchScoringConfig, data)
    assert len(err.value.errors) == 6
    text = str(err.value)
    for fragment in ("warp-drive", "batch_sizes", "budgets", "repeats", "dynamic", "baseline"):
        assert fragment in text


def test_runtime_not_installed_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry entry's needed packages decide: a missing one names the package to install."""
    entry = SCORERS.entry("ort")
    missing = RuntimeInfo(needs=(("no_such_module_for_rlsim_tests", "pip install no-such-package"),))
    monkeypatch.setitem(SCORERS._items, "ort", dataclasses.replace(entry, info=missing))
    with pytest.raises(ConfigError, match="runtime 'ort' needs no_such_module_for_rlsim_tests.*pip install no-such"):
        validate(BenchScoringConfig, {"runtimes": ["eager", "ort"]})


def test_bad_plugin_module_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLSIM_PLUGINS", "no_such_plugin_module_xyz")
    with pytest.raises(RlsimError, match="RLSIM_PLUGINS names 'no_such_plugin_module_xyz'"):
        scoring_config.import_plugins()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--batch-sizes", "0"], "--batch-sizes: 0 is out of range"),  # range-checked by argparse (issue 18)
        (["--repeats", "1"], "--repeats: 1 is out of range; give a whole number >= 2"),
        (["--runtimes", "eager,nope"], "unknown runtime 'nope'"),
        (["--batchers", "fixed,dynamic"], "unknown batcher"),
        (["--budgets", "40"], "smaller than one sequence"),
    ],
)
def test_cli_rejects_bad_input_before_running(tmp_path, capsys, flags: list[str], message: str) -> None:
    out = tmp_path / "out"
    code = main(["bench", "scoring", "--runtimes", "eager", "--count", "4", "--out", str(out), *flags])
    assert code == 2
    assert re.search(message, capsys.readouterr().err)
    assert not out.exists()  # nothing ran, nothing was written
