"""The Ray plumbing with test doubles on the two-node cluster: placement, streaming, scorer crashes, timeouts.

No vLLM here (see tests/loop/test_loop_ray.py for the real loop), so these run in seconds once the
session's cluster is up.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from rlsim.errors import RlsimError
from rlsim.loop.schedules.step import run_step
from rlsim.loop.sync import WeightSync
from rlsim.placement import ResolvedPlacement
from tests.helpers import loop_doubles
from tests.helpers.loop_doubles import FakeGenerator, FakeStage, FakeTrainer, requests

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def by_value(ray_cluster):
    # Ray's workers cannot import the tests folder: ship the doubles' code with the calls.
    ray.cloudpickle.register_pickle_by_value(loop_doubles)
    yield
    ray.cloudpickle.unregister_pickle_by_value(loop_doubles)


def placements(num_cpus: float = 0.25) -> dict[str, ResolvedPlacement]:
    p = ResolvedPlacement((0,), 1, 0.0, num_cpus)
    return {"rollout": p, "scorer": p, "trainer": p}


def start(makers: dict, replicas: int = 2, strategy: str = "SPREAD", num_cpus: float = 0.25, timeout: float = 60):
    from rlsim.actors.ray_actors import create_actors

    return create_actors(placements(num_cpus), makers, replicas, strategy, ready_timeout_s=timeout, start_timeout_s=120)


def fakes(**stage) -> dict:
    return {"rollout": FakeGenerator, "scorer": partial(FakeStage, **stage), "trainer": FakeTrainer}


def test_both_schedules_run_over_ray_spread_across_two_nodes(by_value) -> None:
    from rlsim.loop.backends.ray import RayBackend

    actors = start(fakes())
    try:
        assert len({info["node"] for info in actors.info}) == 2  # SPREAD used both nodes
        backend = RayBackend(actors, WeightSync("auto", 0.0))
        for schedule in ("sequential", "overlapped"):
            out = run_step(backend, schedule, requests(4, 3), micro_batch=4)
            assert out.counts == {"requested": 12, "generated": 12, "scored": 12, "trained": 12}
            assert out.sync.method == "fake-reload"  # weights went trainer -> object store -> rollout actor
        assert {e.actor for e in out.events if e.phase == "score"} == {"scorer-0", "scorer-1"}
        cpu = backend.cpu_seconds()
        assert set(cpu) == {"rollout", "scorer-0", "scorer-1", "trainer"}
        assert all(pid > 0 and seconds > 0 for pid, seconds in cpu.values())
        assert len({pid for pid, _ in cpu.values()}) == 4  # four processes
    finally:
        actors.close()


def test_a_scorer_that_dies_mid_step_is_restarted_and_its_batch_resent(by_value, tmp_path: Path) -> None:
    from rlsim.loop.backends.ray import RayBackend

    actors = start(fakes(die_once_flag=str(tmp_path / "died")), replicas=1, strategy="PACK")
    try:
        backend = RayBackend(actors, WeightSync("simulated", 0.0))
        out = run_step(backend, "overlapped", requests(4, 3), micro_batch=4)
        assert (tmp_path / "died").exists()  # the crash really happened
        assert out.counts["scored"] == out.counts["trained"] == 12
        # Every batch queued on the scorer when it died is sent again (and again, while it restarts).
        assert backend.faults["resubmitted_batches"] >= 1
        assert backend.faults["scorer_failures"] == 1
    finally:
        actors.close()


def test_with_two_replicas_a_dead_scorers_batches_go_to_the_other_and_nothing_is_lost(by_value, tmp_path) -> None:
    """The router sends each batch of the overlapped step to the replica with the fewest calls outstanding;
    the first scorer call to run dies (both replicas share the flag), and every batch that was queued on the
    dead replica is re-sent to the living one, which the step's router summary records."""
    from rlsim.loop.backends.ray import RayBackend

    actors = start(fakes(die_once_flag=str(tmp_path / "died")), replicas=2, strategy="PACK")
    try:
        backend = RayBackend(actors, WeightSync("simulated", 0.0))
        out = run_step(backend, "overlapped", requests(4, 3), micro_batch=2)
        assert (tmp_path / "died").exists()
        assert out.counts["scored"] == out.counts["trained"] == 12
        summary = backend.router.take_summary()
        resent = [s["resent_here"] for s in summary]
        assert backend.faults["scorer_failures"] == 1 and backend.faults["resubmitted_batches"] == sum(resent) >= 1
        assert min(resent) == 0  # all went to the replica that lived
        assert sum(s["calls"] for s in summary) == 6 + sum(resent)  # six micro-batches, each scored once more
        assert sum(s["rollouts"] for s in summary) >= 12 and all(s["max_queue_depth"] >= 1 for s in summary)
    finally:
        actors.close()


def test_more_than_the_cluster_has_is_refused_at_once(by_value) -> None:
    with pytest.raises(RlsimError, match="ask Ray for 8 CPU in all but the cluster has 4"):
        start(fakes(), num_cpus=2.0)


def test_an_unplaceable_group_times_out_with_advice(by_value) -> None:
    # STRICT_SPREAD needs one node per actor: 4 actors, 2 nodes.
    with pytest.raises(RlsimError, match="could not place 4 actors"):
        start(fakes(), strategy="STRICT_SPREAD", timeout=3)


def test_an_actor_that_fails_to_start_reports_the_cause(by_value) -> None:
    makers = {**fakes(), "scorer": loop_doubles.broken_factory}
    with pytest.raises(RlsimError, match="fix reward.model"):
        start(makers, replicas=1)


def test_injected_scorer_kill_is_survived(by_value) -> None:
    from rlsim.loop.backends.faults import FaultPlan
    from rlsim.loop.backends.ray import RayBackend

    actors = start(fakes(), replicas=1, strategy="PACK")
    try:
        backend = RayBackend(actors, WeightSync("simulated", 0.0), plan=FaultPlan(kill_scorer_steps=(2,)))
        for step in (1, 2):
            backend.begin_step(step)
            out = run_step(backend, "overlapped", requests(4, 3), micro_batch=4)
            assert out.counts["scored"] == out.counts["trained"] == 12
        assert backend.faults["injected"] == backend.faults["survived"] == 1  # only step 2 had a kill
        # Whether a batch had to be resent depends on timing (the first one may finish before the
        # kill lands); test_a_scorer_that_dies_mid_step... covers resending.
    finally:
        actors.close()


def test_injected_rollout_kill_fails_the_step_with_a_clear_error(by_value) -> None:
    from rlsim.loop.backends.faults import FaultPlan
    from rlsim.loop.backends.ray import RayBackend

    actors = start(fakes(), replicas=1, strategy="PACK")
    try:
        backend = RayBackend(actors, WeightSync("simulated", 0.0), plan=FaultPlan(kill_rollout_step=1))
        backend.begin_step(1)
        with pytest.raises(RlsimError, match="rollout actor died"):
            run_step(backend, "sequential", requests(4, 3), micro_batch=4)
        assert backend.faults == {**backend.faults, "injected": 1, "survived": 0}
    finally:
        actors.close()


def test_a_stalled_scorer_fails_the_step_instead_of_hanging(by_value) -> None:
    from rlsim.loop.backends.ray import RayBackend

    actors = start({**fakes(), "scorer": loop_doubles.StallingStage}, replicas=1, strategy="PACK")
    try:
        backend = RayBackend(actors, WeightSync("simulated", 0.0), score_timeout_s=2.0)
        with pytest.raises(RlsimError, match="no scoring batch finished within 2 s .* scorer-0"):
            run_step(backend, "sequential", requests(2, 2), micro_batch=4)
    finally:
        actors.close(timeout_s=2)


@pytest.mark.parametrize("schedule", ["sequential", "overlapped"])
def test_a_stalled_phase_fails_the_step_naming_the_phase_and_the_setting(by_value, tmp_path: Path, schedule) -> None:
    """Each phase in turn is held (a file the doubles wait on) past a 1 s deadline, the others get
    the default deadlines. Without deadlines the held call would just finish late (after 20 s)."""
    from rlsim.loop.backends.ray import RayBackend
    from rlsim.loop.deadline import PhaseTimeout, PhaseTimeouts

    held = str(tmp_path)
    makers = {
        **fakes(),
        "rollout": partial(FakeGenerator, hold_dir=held),
        "trainer": partial(FakeTrainer, hold_dir=held),
    }
    actors = start(makers, replicas=1, strategy="PACK")
    cases = [("generate", "rollout"), ("update", "trainer"), ("sync", "rollout")]
    try:
        for phase, actor in cases:
            backend = RayBackend(actors, WeightSync("auto", 0.0), timeouts=PhaseTimeouts(**{f"{phase}_s": 1.0}))
            (tmp_path / phase).touch()
            message = f"the {phase} phase did not finish within 1 s .*{actor} actor.*raise faults.{phase}_timeout_s"
            with pytest.raises(PhaseTimeout, match=message):
                run_step(backend, schedule, requests(2, 2), micro_batch=2)
            if phase == "update":  # the trainer is still held: it cannot answer the CPU-time probe either
                probe = RayBackend(actors, WeightSync("auto", 0.0), timeouts=PhaseTimeouts(probe_s=1.0))
                with pytest.raises(PhaseTimeout, match="CPU-time probe .*the trainer actor.*faults.probe_timeout_s"):
                    probe.cpu_seconds()
            if phase == "sync":  # a stalled reload is not an engine that cannot reload: no fallback
                assert backend._sync.fallback_reason is None
            (tmp_path / phase).unlink()  # the held call finishes; the actor is free again
        backend = RayBackend(actors, WeightSync("auto", 0.0), timeouts=PhaseTimeouts(warmup_s=1.0))
        (tmp_path / "warmup").touch()
        with pytest.raises(PhaseTimeout, match="warm-up did not finish within 1 s .*trainer actor.*warmup_timeout_s"):
            backend.warmup(requests(1, 2))
        (tmp_path / "warmup").unlink()
        out = run_step(backend, schedule, requests(2, 2), micro_batch=2)  # nothing is left stuck
        assert out.counts["trained"] == 4 and out.sync.method == "fake-reload"
    finally:
        for path in tmp_path.iterdir():
            path.unlink()
        actors.close()
