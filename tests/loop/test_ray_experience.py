"""The reference and critic as Ray actors with test doubles: colocation, and what a killed one does.

No vLLM here (tests/loop/test_loop_ppo.py runs the real PPO loop), so these run in seconds once the
session's cluster is up.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from rlsim.errors import RlsimError
from rlsim.loop.schedules.ppo import run_ppo_step
from rlsim.loop.sync import WeightSync
from rlsim.placement import ResolvedPlacement
from tests.helpers import loop_doubles
from tests.helpers.loop_doubles import FakeCritic, FakeGenerator, FakePpoTrainer, FakeReference, FakeStage, requests

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray")

ROLES = ("rollout", "scorer", "trainer", "reference", "critic")


@pytest.fixture(scope="module")
def by_value(ray_cluster):
    ray.cloudpickle.register_pickle_by_value(loop_doubles)
    yield
    ray.cloudpickle.unregister_pickle_by_value(loop_doubles)


def start(
    colocate: list[list[str]] | None = None,
    reference_flag: str | None = None,
    critic_flag: str | None = None,
    replicas: int = 1,
):
    from rlsim.actors.ray_actors import create_actors
    from rlsim.loop.backends.ray import RayBackend

    p = ResolvedPlacement((0,), 1, 0.0, 0.25)
    makers = {
        "rollout": FakeGenerator,
        "scorer": FakeStage,
        "trainer": FakePpoTrainer,
        "reference": partial(FakeReference, reference_flag),
        "critic": partial(FakeCritic, critic_flag),
    }
    actors = create_actors(
        dict.fromkeys(ROLES, p), makers, replicas, "PACK", ready_timeout_s=60, start_timeout_s=120, colocate=colocate
    )
    return actors, RayBackend(actors, WeightSync("simulated", 0.0))


@pytest.mark.parametrize("schedule", ["sequential", "overlapped"])
def test_colocated_roles_run_in_one_process_each_and_a_step_counts_every_rollout(by_value, schedule) -> None:
    actors, backend = start([["reference", "scorer"], ["critic", "trainer"]], replicas=2)
    try:
        assert actors.names == ["rollout", "reference+scorer-0", "scorer-1", "critic+trainer"]
        assert actors.reference is actors.scorers[0] and actors.critic is actors.trainer
        out = run_ppo_step(backend, schedule, requests(4, 3), micro_batch=4)
        assert out.counts == {
            "requested": 12,
            "generated": 12,
            "scored": 12,
            "referenced": 12,
            "valued": 12,
            "trained": 12,
        }
        cpu = backend.cpu_seconds()
        assert set(cpu) == set(actors.names)
        assert len({pid for pid, _ in cpu.values()}) == 4  # four processes for five roles
        # The colocated roles took turns: in one process no two events overlap.
        for pair in (("reference", "scorer-0"), ("critic", "trainer")):
            spans = sorted((e.start, e.end) for e in out.events if e.actor in pair)
            gaps = [b_start - a_end for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False)]
            assert min(gaps) >= -1e-3, pair
    finally:
        actors.close()


def test_a_reference_that_dies_mid_step_is_restarted_and_its_batches_resent(by_value, tmp_path: Path) -> None:
    actors, backend = start(reference_flag=str(tmp_path / "died"))
    try:
        out = run_ppo_step(backend, "overlapped", requests(4, 3), micro_batch=4)
        assert (tmp_path / "died").exists()  # the crash really happened
        assert out.counts["referenced"] == out.counts["trained"] == 12
        assert backend.faults["resubmitted_reference_batches"] >= 1
    finally:
        actors.close()


def test_a_critic_that_dies_fails_the_step_naming_it(by_value, tmp_path: Path) -> None:
    actors, backend = start(critic_flag=str(tmp_path / "died"))
    try:
        with pytest.raises(RlsimError, match=r"the critic actor died computing batch \d.*not restarted"):
            run_ppo_step(backend, "overlapped", requests(4, 3), micro_batch=4)
        assert (tmp_path / "died").exists()
    finally:
        actors.close()
