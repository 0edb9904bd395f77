import json

import pytest

from rlsim.errors import RlsimError
from rlsim.rewards.program_bank import PROGRAM, BankProgram, ProgramBank, build_bank, candidates
from rlsim.rewards.sandbox import SandboxLimits, run_program


def _run(source):
    result = run_program(source, SandboxLimits())
    return result.passed, result.seconds


def test_candidates_are_real_doctests_of_installed_modules():
    progs = candidates(["statistics", "difflib"], per_module=3)
    assert len(progs) == 6
    assert all(p.name.startswith(("statistics", "difflib")) and ">>>" in p.source for p in progs)


def test_the_bank_keeps_what_passes_caches_it_and_a_broken_check_fails(tmp_path):
    cache = tmp_path / "bank.json"
    bank = build_bank(_run, modules=["statistics"], cache=cache)
    assert bank.programs and json.loads(cache.read_text())["modules"] == ["statistics"]
    again = build_bank(lambda s: (_ for _ in ()).throw(AssertionError("rebuilt")), modules=["statistics"], cache=cache)
    assert [p.name for p in again.programs] == [p.name for p in bank.programs]
    assert run_program(bank.programs[0].source, SandboxLimits()).passed


def test_a_program_fails_when_an_expected_output_is_wrong():
    right = PROGRAM.format(module="statistics", text=">>> mean([1, 2, 3])\n2\n", name="t")
    wrong = PROGRAM.format(module="statistics", text=">>> mean([1, 2, 3])\n3\n", name="t")
    assert run_program(right, SandboxLimits()).passed and not run_program(wrong, SandboxLimits()).passed


def test_pick_gives_the_program_nearest_in_length():
    bank = ProgramBank([BankProgram(n, size, "", 0) for n, size in [("a", 10), ("b", 100), ("c", 1000)]])
    assert [bank.pick(n).name for n in (0, 10, 54, 56, 400, 600, 10**6)] == ["a", "a", "a", "b", "b", "c", "c"]
    with pytest.raises(RlsimError, match="empty"):
        ProgramBank([])
