"""The rule-based reward's worker pool against queueing theory and a hand-computed step."""

from __future__ import annotations

import numpy as np
import pytest

from rlsim.planner.profile.scaling import RewardFunctionModel
from rlsim.planner.sim.evaluate import evaluate
from rlsim.planner.sim.reward_pool import allen_cunneen_wait_s, erlang_c_wait_s, simulate_reward_pool
from rlsim.planner.spec.cluster import NodeSpec
from tests.helpers.planner_cases import fixed_workload, make_profile, placement


def mean_wait(model: RewardFunctionModel, rate: float, workers: int, seed: int, n: int = 200_000) -> float:
    """Mean time in queue of ``n`` Poisson arrivals at ``rate`` per second served by the pool."""
    rng = np.random.default_rng(seed)
    arrive = np.cumsum(rng.exponential(1.0 / rate, n))
    service = model.sample(rng, n)
    out = simulate_reward_pool(arrive, service, workers, workers)
    return float(np.mean(out.reward_s - service - arrive))


def test_erlang_c_formula_by_hand() -> None:
    # M/M/2, lambda 1, mu 1 (a = 1): C = (1/2 x 2/1) / (1 + 1 + 1) = 1/3; Wq = C / (2 - 1) = 1/3 s.
    assert erlang_c_wait_s(1.0, 1.0, 2) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="without bound"):
        erlang_c_wait_s(2.0, 1.0, 2)


@pytest.mark.parametrize("workers,load", [(2, 0.4), (4, 0.5), (8, 0.6)])
def test_mmc_mean_wait_matches_erlang_c(workers: int, load: float) -> None:
    """Poisson arrivals, exponential service (M/M/c): the simulated mean wait is Erlang C's within 5 %."""
    model = RewardFunctionModel(mean_s=0.2, distribution="exponential")
    rate = load * workers / model.mean_s
    simulated = mean_wait(model, rate, workers, seed=workers)
    assert simulated == pytest.approx(erlang_c_wait_s(rate, model.mean_s, workers), rel=0.05)


def test_mgc_lognormal_near_allen_cunneen() -> None:
    """Lognormal service, cv 0.5: Allen-Cunneen is an approximation (seen 9-10 % low at load 0.5)."""
    model = RewardFunctionModel(mean_s=1.0, cv=0.5, distribution="lognormal")
    simulated = mean_wait(model, 2.0, 4, seed=0)
    assert simulated == pytest.approx(allen_cunneen_wait_s(2.0, 1.0, 0.5, 4), rel=0.15)
    # Less variable service waits less than exponential service at the same load.
    assert simulated < erlang_c_wait_s(2.0, 1.0, 4)


def test_lognormal_samples_have_the_asked_mean_and_cv() -> None:
    x = RewardFunctionModel(mean_s=0.03, cv=0.8).sample(np.random.default_rng(0), 400_000)
    assert x.mean() == pytest.approx(0.03, rel=0.01)
    assert x.std() / x.mean() == pytest.approx(0.8, rel=0.03)


def test_never_more_busy_than_the_cap() -> None:
    rng = np.random.default_rng(1)
    arrive = np.sort(rng.uniform(0, 1, 500))
    out = simulate_reward_pool(arrive, np.full(500, 0.05), workers=3, workers_per_node=3)
    events = sorted([(s, 1) for xs in out.busy_starts for s in xs] + [(e, -1) for xs in out.busy_ends for e in xs])
    assert max(np.cumsum([d for _, d in events])) == 3
    assert out.done_s == pytest.approx(max(out.reward_s))


def test_function_reward_step_by_hand() -> None:
    """8 rollouts of 10 tokens on one engine, then 8 checks of 0.5 s on 2 workers.

    4 cores, half for the 2 workers: the engine gets 2 cores, so an iteration takes 0.1 x 1/2 = 0.05 s
    (make_profile: 0.1 s on one core, exponent 1) and generation 10 x 0.05 = 0.5 s. Sequential: the
    2 workers take 4 checks each, 2 s more; update 0.3 s, sync 0.2 s: 3.0 s in all.
    """
    profile = make_profile()
    verifier = RewardFunctionModel(mean_s=0.5, distribution="fixed")
    profile = profile.model_copy(update={"reward_functions": {"verifier": verifier}})
    node = NodeSpec(count=1, cores=4, gpus=0, kind="test-kind")
    spec = placement(runtime="verifier", replicas_per_node=2)
    ev = evaluate(node, profile, fixed_workload(prompts=2, group=4, response=10), spec, steps=1, noise=False)
    assert ev.resources.replicas == 2
    assert ev.time_s["score_tail"] == pytest.approx(2.0)
    assert ev.step_time_s == pytest.approx(3.0)


@pytest.mark.parametrize("window", [8, 4])
@pytest.mark.parametrize("workers", [1, 2])
def test_async_function_reward_step_by_hand(workers: int, window: int) -> None:
    """The step above under ``schedule: async`` (staleness 1): generation (0.5 s a batch) runs ahead, and
    the pool is the bottleneck: 8 checks of 0.5 s on ``workers`` processes take 4.0 / workers seconds a
    step, whether a call holds the batch or half of it (a call's checks spread over the node's pool)."""
    verifier = RewardFunctionModel(mean_s=0.5, distribution="fixed")
    profile = make_profile().model_copy(update={"reward_functions": {"verifier": verifier}})
    node = NodeSpec(count=1, cores=4, gpus=0, kind="test-kind")
    spec = placement("async", runtime="verifier", replicas_per_node=workers, batcher_window=window)
    ev = evaluate(node, profile, fixed_workload(prompts=2, group=4, response=10), spec, steps=5, noise=False)
    assert ev.step_time_s == pytest.approx(4.0 / workers)
    assert ev.rollouts_per_hour == pytest.approx(8 * 3600 / (4.0 / workers))
    assert ev.bottleneck == "scoring"
    assert ev.extra["async"]["rollouts_total"]["generated"] >= 40


def test_a_batch_waits_for_its_slowest_check_before_the_next_starts() -> None:
    """Two batches of three checks (1, 1, 2 s) on a pool of 2 workers: the first ends at 3 s (a worker takes
    the 2 s check at 1 s), only then does the second start (the actor's batch), ending at 6 s; without the
    batches a free worker would have started it at 1 s."""
    from rlsim.planner.sim.reward_pool import score_in_chunks

    service = np.array([1.0, 1.0, 2.0, 1.0, 1.0, 2.0])
    out = score_in_chunks([np.arange(3), np.arange(3, 6)], [0.0, 0.0], service, pools=1, workers=2, pools_per_node=1)
    assert list(out.reward_s) == [1.0, 1.0, 3.0, 4.0, 4.0, 6.0] and out.done_s == 6.0
    two = score_in_chunks([np.arange(3), np.arange(3, 6)], [0.0, 0.0], service, pools=2, workers=2, pools_per_node=2)
    assert two.done_s == 3.0  # two actors take a batch each at once


def _verifier_step(**kw: object) -> float:
    verifier = RewardFunctionModel(mean_s=0.5, distribution="fixed")
    contention = {"gen_slowdown": kw.pop("gen_slowdown", 0.0), "score_slowdown": kw.pop("score_slowdown", 0.0)}
    running = int(kw.pop("max_running", 64))  # type: ignore[call-overload]
    profile = make_profile(max_running=running, **contention)  # type: ignore[arg-type]
    profile = profile.model_copy(update={"reward_functions": {"verifier": verifier}})
    node = NodeSpec(count=1, cores=int(kw.pop("cores", 4)), gpus=0, kind="test-kind")
    spec = placement(runtime="verifier", **kw)
    return evaluate(
        node, profile, fixed_workload(prompts=2, group=4, response=10), spec, steps=1, noise=False
    ).step_time_s


def test_workers_beyond_the_cores_share_them_and_the_engine_is_slowed_when_they_overlap_it() -> None:
    # 4 workers on the 2 scoring cores of the step above, batches of 4: each check runs at half speed, so the 8
    # checks still take 2 s; batches of 2 keep only 2 at once, at full speed.
    assert _verifier_step(replicas_per_node=4, batch=4) == pytest.approx(_verifier_step(replicas_per_node=2, batch=4))
    assert _verifier_step(replicas_per_node=4, batch=2) == pytest.approx(_verifier_step(replicas_per_node=2, batch=2))
    assert _verifier_step(replicas_per_node=2, batch=4) == pytest.approx(3.0)
    # Colocated and overlapped on a CPU node, one sequence decoded at a time so that checks run while the engine
    # generates: checks and generation slow each other by the contention entry.
    overlapped = {"schedule": "overlapped", "colocated": True, "replicas_per_node": 2, "batcher_window": 2}
    free = _verifier_step(**overlapped, max_running=1)
    slowed = _verifier_step(**overlapped, max_running=1, gen_slowdown=1.0, score_slowdown=1.0)
    assert slowed > free * 1.05
