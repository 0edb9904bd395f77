"""The step with the experience roles (reference, critic), in-process, with test doubles in the real workers."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import numpy as np
import pytest

from rlsim.actors.role_workers import ColocatedWorker, CriticWorker, ReferenceWorker
from rlsim.actors.workers import RolloutWorker, ScoringWorker, TrainerWorker
from rlsim.loop.backends.local import InProcessBackend
from rlsim.loop.outputs.records import step_record
from rlsim.loop.schedules.ppo import EXPERIENCE_PHASES, run_ppo_step
from rlsim.loop.sync import WeightSync
from tests.helpers.loop_doubles import (
    DroppingStage,
    FakeCritic,
    FakeGenerator,
    FakePpoTrainer,
    FakeReference,
    FakeStage,
    requests,
)


def backend(
    algorithm: str = "ppo",
    kl_coef: float = 0.1,
    scorers: int = 2,
    reference: object = None,
    critic: object = None,
    stage: Callable[[], FakeStage] = FakeStage,
) -> InProcessBackend:
    rollout = RolloutWorker("rollout", None, FakeGenerator, pin=False)
    stages = [ScoringWorker(f"scorer-{i}", None, stage, pin=False) for i in range(scorers)]
    trainer = TrainerWorker("trainer", None, partial(FakePpoTrainer, algorithm, kl_coef), pin=False)
    ref = ReferenceWorker("reference", None, lambda: reference or FakeReference(), pin=False) if kl_coef > 0 else None
    crit = CriticWorker("critic", None, lambda: critic or FakeCritic(), pin=False) if algorithm == "ppo" else None
    return InProcessBackend(rollout, stages, trainer, WeightSync("auto", 0.0), ref, crit)


def test_sequential_scores_references_and_values_every_rollout_then_advantages_then_both_updates() -> None:
    b = backend()
    out = run_ppo_step(b, "sequential", requests(4, 3), micro_batch=4)
    assert out.counts == {"requested": 12, "generated": 12, "scored": 12, "referenced": 12, "valued": 12, "trained": 12}
    order = [e.phase for e in out.events]
    # Generation first; the three experience passes each see the whole batch in one call (scoring split 6 + 6).
    assert order[0] == "generate"
    assert sorted(e.items for e in out.events if e.phase == "score") == [6, 6]
    assert [e.items for e in out.events if e.phase in ("reference", "values")] == [12, 12]
    assert order.index("advantages") > max(i for i, p in enumerate(order) if p in ("score", "reference", "values"))
    assert order.index("update_actor") > order.index("advantages")
    assert order.index("update_critic") > order.index("advantages")
    assert [e.actor for e in out.events if e.phase == "update_critic"] == ["critic"]
    # The critic was updated with every rollout, its loss reported beside the actor's statistics.
    assert b.critic.critic.updates == [list(range(12))]
    assert out.train["value_loss"] is not None and out.train["kl"] is not None
    assert out.phases == EXPERIENCE_PHASES


def test_overlapped_sends_every_micro_batch_to_scorer_reference_and_critic() -> None:
    out = run_ppo_step(backend(), "overlapped", requests(4, 3), micro_batch=5)
    n = math.ceil(12 / 5)
    for phase in ("generate", "score", "reference", "values"):
        events = sorted((e for e in out.events if e.phase == phase), key=lambda e: e.batch)
        assert [e.batch for e in events] == list(range(n)), phase
        assert [e.items for e in events] == [5, 5, 2], phase
    assert [e.actor for e in sorted(out.events, key=lambda e: e.batch) if e.phase == "score"] == [
        "scorer-0",
        "scorer-1",
        "scorer-0",
    ]
    assert out.counts["referenced"] == out.counts["valued"] == out.counts["trained"] == 12


def test_grpo_with_a_kl_runs_the_reference_but_no_critic() -> None:
    out = run_ppo_step(backend("grpo", 0.1), "overlapped", requests(2, 3), micro_batch=4)
    assert "valued" not in out.counts and out.counts["referenced"] == 6
    assert not [e for e in out.events if e.phase in ("values", "update_critic")]
    assert out.train["value_loss"] is None and out.train["kl"] > 0


def test_the_step_record_has_the_experience_phases_and_counts() -> None:
    out = run_ppo_step(backend(), "overlapped", requests(4, 3), micro_batch=4)
    rec = step_record(1, "overlapped", out, {"rollout": 1.0}, {"prompt": 48, "generated": 100}).model_dump(mode="json")
    assert list(rec["time_s"]) == ["generate", "score", "update", "sync", "idle", "total", *EXPERIENCE_PHASES]
    assert rec["rollouts"] == {"generated": 12, "scored": 12, "trained": 12, "referenced": 12, "valued": 12}
    t = rec["time_s"]
    # update is the union of advantages, update_actor and update_critic, which run one after another here.
    assert t["update"] == pytest.approx(t["advantages"] + t["update_actor"] + t["update_critic"], abs=1e-5)


class _LosesOne(FakeReference):
    def logprobs(self, rollouts):  # type: ignore[no-untyped-def]
        out = super().logprobs(rollouts)
        out.pop(rollouts[0].uid)
        return out


class _ShortValues(FakeCritic):
    def values(self, rollouts):  # type: ignore[no-untyped-def]
        return {uid: v[:-1] for uid, v in super().values(rollouts).items()}


@pytest.mark.parametrize("schedule", ["sequential", "overlapped"])
def test_a_rollout_the_reference_lost_fails_the_step(schedule: str) -> None:
    with pytest.raises(RuntimeError, match="1 rollouts were not referenced"):
        run_ppo_step(backend(reference=_LosesOne()), schedule, requests(2, 2), micro_batch=4)


def test_values_of_the_wrong_length_fail_the_step() -> None:
    with pytest.raises(RuntimeError, match="was valued with .* values for its"):
        run_ppo_step(backend(critic=_ShortValues()), "sequential", requests(2, 2), micro_batch=4)


def test_unknown_schedule_is_refused() -> None:
    with pytest.raises(ValueError, match="valid: sequential, overlapped"):
        run_ppo_step(backend(), "pipelined", requests(), micro_batch=4)  # type: ignore[arg-type]


def test_colocated_roles_share_one_worker_and_keep_their_own_event_names() -> None:
    both = ColocatedWorker(
        "critic+trainer", None, {"critic": ("critic", FakeCritic), "trainer": ("trainer", FakePpoTrainer)}, pin=False
    )
    ref_scorer = ColocatedWorker(
        "reference+scorer-0",
        None,
        {"reference": ("reference", FakeReference), "scorer": ("scorer-0", FakeStage)},
        pin=False,
    )
    rollout = RolloutWorker("rollout", None, FakeGenerator, pin=False)
    b = InProcessBackend(rollout, [ref_scorer], both, WeightSync("auto", 0.0), ref_scorer, both)
    out = run_ppo_step(b, "overlapped", requests(3, 2), micro_batch=4)
    assert out.counts["valued"] == out.counts["referenced"] == out.counts["trained"] == 6
    actors = {e.phase: e.actor for e in out.events}
    assert actors["reference"] == "reference" and actors["score"] == "scorer-0"
    assert actors["update_critic"] == "critic" and actors["update_actor"] == "trainer"
    assert both.ready()["roles"] == ["critic", "trainer"]
    with pytest.raises(RuntimeError, match="holds critic, trainer, not the reference"):
        both.ref_logprobs([], 0)


def test_the_kl_in_the_reward_uses_the_reference_log_probs_it_was_sent() -> None:
    # FakeReference gives -(uid % 5 + 1) / 10 per token and the trainer's behaviour log-prob is -0.2, so
    # with k3 the KL of uid 1 (ref -0.2) is 0 and of uid 0 (ref -0.1) is e^0.1 - 1 - 0.1 > 0 per token.
    b = backend("grpo", 0.1, scorers=1)
    rollouts, _ = b.result(b.submit_generate(requests(1, 2)))
    ref = {uid: v for part, _ in [b.result(b.submit_reference(rollouts, 0))] for uid, v in part.items()}
    exp = b.trainer.trainer.experience(rollouts, {0: 1.0, 1: 1.0}, ref, None)
    assert np.allclose(exp.kl[1], 0.0, atol=1e-7)
    assert np.allclose(exp.kl[0], math.exp(0.1) - 1 - 0.1, atol=1e-6)


@pytest.mark.parametrize("schedule", ["sequential", "overlapped"])
def test_ppo_trains_the_groups_no_dropped_reward_touched(schedule: str) -> None:
    b = backend(stage=partial(DroppingStage, {2}))  # uid 2 is in group 0 (uids 0-2)
    out = run_ppo_step(b, schedule, requests(4, 3), micro_batch=4)
    assert out.counts["trained"] == 9 and out.counts["dropped"] == 3
    assert out.counts["referenced"] == out.counts["valued"] == 12  # the experience passes saw every rollout
    assert sorted(b.trainer.trainer.seen[0][0]) == list(range(3, 12))
    assert b.critic.critic.updates == [list(range(3, 12))]
