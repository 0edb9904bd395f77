"""Driver logic that needs no actors: CPU-second deltas across a restart, fault totals across a resume, the check
of a borrowed rollout actor against the config."""

from __future__ import annotations

import dataclasses

import pytest

from rlsim.errors import RlsimError
from rlsim.loop.config import RunConfig
from rlsim.loop.driver import check_borrowed_rollout, cpu_deltas, warmup_requests
from rlsim.loop.roles.build import factories
from rlsim.loop.run import _faults
from rlsim.placement import resolve_placement


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


def _rollout_factory(**config: object):
    cfg = RunConfig.model_validate({"policy": {"model": "tiny-llama", "backend": "vllm"}, **config})
    placements = resolve_placement(cfg.placement, [0, 1], ["rollout", "scorer", "trainer"])
    return factories(cfg, placements)["rollout"]


def test_a_borrowed_rollout_built_for_the_same_generator_passes() -> None:
    wanted = _rollout_factory()
    check_borrowed_rollout(wanted.args, wanted)
    # the async schedule's engine returns behaviour log-probs; a run that needs none takes them unused
    backend, policy, settings = wanted.args
    check_borrowed_rollout((backend, policy, dataclasses.replace(settings, behaviour_logprobs=True)), wanted)


@pytest.mark.parametrize(
    ("other", "named"),
    [
        ({"policy": {"model": "tiny-llama", "backend": "hf"}}, "backend hf (this run: vllm)"),
        ({"policy": {"model": "tiny-llama", "backend": "vllm", "temperature": 0.5}}, "temperature 0.5"),
        ({"seed": 7}, "seed 7"),
        ({"schedule": "async", "async": {"max_staleness": 1}}, None),
    ],
)
def test_a_borrowed_rollout_of_another_generator_is_refused_naming_what_differs(other, named) -> None:
    held = _rollout_factory(**other).args
    if named is None:  # the borrower needs behaviour log-probs, the held engine was built without them
        held, wanted = _rollout_factory().args, _rollout_factory(**other)
        named = "behaviour_logprobs off"
    else:
        wanted = _rollout_factory()
    with pytest.raises(RlsimError, match="borrowed rollout actor") as err:
        check_borrowed_rollout(held, wanted)
    assert named in str(err.value)


def test_a_rollout_actor_not_built_from_a_config_is_refused() -> None:
    with pytest.raises(RlsimError, match="not built from a run config"):
        check_borrowed_rollout(None, _rollout_factory())


def test_a_session_that_would_kill_a_borrowed_rollout_is_refused_before_anything_starts() -> None:
    from rlsim.loop.driver import LoopSession

    config = RunConfig.model_validate({"faults": {"kill_rollout_step": 1}})
    with pytest.raises(RlsimError, match="kill_rollout_step would kill the rollout actor this session borrows"):
        LoopSession(config, rollout=object()).start()
