"""Driver arithmetic that needs no actors: CPU-second deltas across a restart, fault totals across a resume."""

from __future__ import annotations

import pytest

from rlsim.loop.config import RunConfig
from rlsim.loop.driver import cpu_deltas, warmup_requests
from rlsim.loop.run import _faults


def test_cpu_deltas_subtract_per_process_and_restart_from_zero_for_a_new_pid() -> None:
    before = {"rollout": (10, 5.0), "scorer-0": (11, 2.0)}
    after = {"rollout": (10, 7.5), "scorer-0": (99, 0.75), "driver": (1, 0.25)}
    # rollout: same process, 7.5 - 5.0; scorer-0 restarted (new pid): only the new process's 0.75 s;
    # driver: no earlier reading, so all of it.
    assert cpu_deltas(before, after) == pytest.approx({"rollout": 2.5, "scorer-0": 0.75, "driver": 0.25})


class _Backend:
    faults = {"injected": 1, "survived": 1, "resubmitted_batches": 2}


class _Session:
    backend = _Backend()


def test_fault_counts_add_up_across_a_resume() -> None:
    total = _faults(_Session(), {"injected": 2, "survived": 1, "scorer_failures": 1})  # type: ignore[arg-type]
    assert total == {"injected": 3, "survived": 2, "resubmitted_batches": 2, "scorer_failures": 1}


def test_warm_up_is_small() -> None:
    reqs = warmup_requests(RunConfig())
    assert len(reqs) == 2 and all(r.response_tokens <= 8 for r in reqs)
