import time

import pytest

from rlsim.errors import RlsimError
from rlsim.rewards.call_pool import CallPool

FNS = "tests.helpers.reward_fns"  # importable here and in the workers (the repo root is on sys.path)


def test_calls_come_back_in_input_order_across_workers():
    pool = CallPool(f"{FNS}:length", workers=3, timeout_s=10)
    try:
        out = pool.map([("p", "x" * n) for n in range(10)])
    finally:
        pool.close()
    assert [o.status for o in out] == ["ok"] * 10
    assert [o.value for o in out] == [float(n) for n in range(10)]


def test_a_call_past_its_deadline_times_out_its_worker_is_replaced_and_the_rest_are_answered():
    pool = CallPool(f"{FNS}:sleepy", workers=2, timeout_s=0.5)
    try:
        t0 = time.monotonic()
        out = pool.map([("", "30"), ("", "0"), ("", "0"), ("", "0")])
        elapsed = time.monotonic() - t0
        assert [o.status for o in out] == ["timeout", "ok", "ok", "ok"]
        assert pool.replaced == 1
        assert elapsed < 10  # the 30 s call did not hold the batch
        assert pool.map([("", "0")])[0].status == "ok"  # the replacement worker answers
    finally:
        pool.close()


def test_exceptions_deaths_and_non_numbers_are_errors_naming_what_happened():
    for target, detail in [("raises", "ValueError: bad answer"), ("dies", "exit code 3"),
                           ("not_a_number", "must return a finite number")]:  # fmt: skip
        pool = CallPool(f"{FNS}:{target}", workers=1, timeout_s=10)
        try:
            (outcome,) = pool.map([("", "r")])
        finally:
            pool.close()
        assert outcome.status == "error" and detail in outcome.detail


def test_prints_in_the_function_do_not_corrupt_answers():
    pool = CallPool(f"{FNS}:chatty", workers=1, timeout_s=10)
    try:
        assert [o.value for o in pool.map([("", "a"), ("", "b")])] == [2.0, 2.0]
    finally:
        pool.close()


def test_a_target_that_does_not_load_is_refused_at_start():
    with pytest.raises(RlsimError, match="no callable 'nope'"):
        CallPool(f"{FNS}:nope", workers=1, timeout_s=1)
    with pytest.raises(ValueError, match="workers >= 1"):
        CallPool(f"{FNS}:length", workers=0, timeout_s=1)
