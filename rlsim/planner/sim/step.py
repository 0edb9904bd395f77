"""One simulated RLHF step: generate, score, wait for every reward, update, sync.

Schedules: ``sequential`` (scoring starts when the last rollout is generated) and ``overlapped``
(each rollout joins the scoring queue when it finishes). The trainer always waits for every reward.

Contention (colocated placement, overlapped schedule): generation on a node slows by
``1 + gen_slowdown x (busy replicas / replicas on the node)`` and scoring by ``1 + score_slowdown x
(engines still generating / engines on the node)``. Each depends on the other, so the step is
solved as a fixed point: generation, then scoring under generation's activity, then generation
under scoring's activity, ... until the step time moves by less than 1e-4 (3-10 rounds; capped
at 12, and ``StepResult.rounds`` says how many ran). This is
the analytic shortcut that keeps 1,000-GPU clusters fast: no per-iteration events are needed.

With ``StepInputs.roles`` (PPO's reference and critic, or a KL's reference) the scorers share their
cores with those roles and the update becomes the actor's and the critic's: ``sim/ppo_roles.py``.
"""

from __future__ import annotations

import numpy as np

from rlsim.planner.sim.events import SpeedProfile
from rlsim.planner.sim.generation import EngineBatch, completion_work_s, deal
from rlsim.planner.sim.ppo_roles import Experience, run_experience
from rlsim.planner.sim.reward_pool import chunked, score_in_chunks, service_times
from rlsim.planner.sim.scoring import ScoringOutcome, simulate_round_robin, simulate_scoring
from rlsim.planner.sim.step_types import CRITICAL_PATH, PHASES, StepInputs, StepResult, union_s
from rlsim.planner.sim.update_steps import extra_actor_s
from rlsim.planner.spec.placement import Resources
from rlsim.schedule_kinds import schedule_kind

__all__ = ["CRITICAL_PATH", "PHASES", "StepInputs", "StepResult", "simulate_step", "union_s"]

_MAX_ROUNDS = 12  # seen: 3-10 rounds to 1e-4 on 1,000 GPUs; a cap keeps a pathological case bounded


def simulate_step(inputs: StepInputs, seed: int, step: int) -> StepResult:
    """Simulate step ``step`` of a run seeded with ``seed`` (same inputs -> same result)."""
    res, spec, profile = inputs.resources, inputs.spec, inputs.profile
    assert profile.generation is not None and profile.trainer is not None
    prompts, responses = inputs.workload.sample_step(seed, step)
    batch = deal(prompts, responses, res.engines)
    work = completion_work_s(batch, profile.generation, res.engine_units, res.max_running, res.tp, res.pp)
    function = inputs.function
    # A rule-based reward's CPU workers beside GPU engines share nothing with them; on a CPU node they do.
    contended = res.shared and schedule_kind(spec.schedule).streams and (function is None or res.gen_device == "cpu")
    if function is None:
        score_tokens = np.minimum(prompts + responses, spec.max_length or inputs.scorer.max_length)
        noise = _noise(inputs, seed, step, len(responses))
    gen_speeds = [SpeedProfile.constant()] * res.nodes
    previous, rounds = -1.0, 0
    while True:
        rounds += 1
        finish = _map_generation(work, batch, gen_speeds, res)
        engine_end = finish.max(axis=1)
        speeds = _scorer_speeds(inputs, engine_end) if contended else None
        experience: Experience | None = None
        if function is not None:
            outcome = _score_function(inputs, batch, finish, seed, step, speeds)
        else:
            outcome = _score(inputs, batch, finish, engine_end, score_tokens, noise, speeds)
        if inputs.roles is not None and function is None:
            experience = run_experience(inputs, batch, finish, engine_end, outcome, speeds[0] if speeds else None)
            outcome = experience.scoring
        total = max(outcome.done_s, float(finish.max()), experience.done_s if experience else 0.0)
        if not contended or abs(total - previous) <= 1e-4 * total or rounds >= _MAX_ROUNDS:
            break
        previous = total
        if experience is not None:
            gen_speeds = experience.generation_speeds()
        else:
            gen_speeds = _generation_speeds(outcome, res, inputs.contention.gen_slowdown)
    result = _assemble(inputs, batch, finish, engine_end, outcome, int(responses.sum()), rounds)
    return experience.assemble(result, inputs, batch, trainer_order(inputs, batch, finish)) if experience else result


def trainer_order(inputs: StepInputs, batch: EngineBatch, finish: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prompt + response tokens and response tokens of the step's rollouts in the order the trainer
    gets them: as they finished when the schedule streams them (``loop/schedules/step.py``
    ``_overlapped``), else in the order they were requested."""
    key = finish[batch.valid] if schedule_kind(inputs.spec.schedule).streams else batch.index[batch.valid]
    order = np.argsort(key, kind="stable")
    return (batch.prompts + batch.responses)[batch.valid][order], batch.responses[batch.valid][order]


def _noise(inputs: StepInputs, seed: int, step: int, rollouts: int) -> np.ndarray:
    """Mean-one lognormal latency multipliers with the fit's relative residual spread."""
    sigma = inputs.scorer.fit.residual_rel_std if inputs.noise else 0.0
    if sigma <= 0:
        return np.ones(1)
    rng = np.random.default_rng([seed, step, 1])
    return rng.lognormal(-(sigma**2) / 2.0, sigma, size=max(rollouts, 1))


def _map_generation(work: np.ndarray, batch: EngineBatch, speeds: list[SpeedProfile], res: Resources) -> np.ndarray:
    """Wall-clock completion times ``(engines, per)`` under each node's generation speed."""
    finish = work.copy()
    for node, speed in enumerate(speeds):
        rows = slice(node * res.engines_per_node, (node + 1) * res.engines_per_node)
        finish[rows] = speed.times_at(work[rows])
    return np.where(batch.valid, finish, 0.0)


def _score(
    inputs: StepInputs,
    batch: EngineBatch,
    finish: np.ndarray,
    engine_end: np.ndarray,
    tokens: np.ndarray,
    noise: np.ndarray,
    speeds: list[SpeedProfile] | None,
) -> ScoringOutcome:
    """Run the scorers on rollouts arriving when generated (overlapped) or all at the end (sequential)."""
    res, spec, scorer = inputs.resources, inputs.spec, inputs.scorer
    arrive = np.zeros(len(tokens))
    arrive[batch.index[batch.valid]] = finish[batch.valid]
    gen_done = float(engine_end.max())
    start = 0.0
    if not schedule_kind(spec.schedule).streams:
        arrive[:] = gen_done
        start = gen_done
    per_node = res.replicas_per_node

    def latency(batch: int, padded: int) -> float:
        return scorer.latency_s(batch, padded, res.replica_units) * scorer.in_loop_factor

    def node_of(replica: int) -> int:
        return replica // per_node

    if spec.dispatch == "round_robin":
        return simulate_round_robin(
            arrive,
            tokens,
            spec.batcher,
            res.replicas,
            latency,
            noise,
            speeds,
            node_of,
            start,
            sequential=not schedule_kind(spec.schedule).streams,
            call_overhead_s=scorer.call_overhead_s,
            pads=scorer.pads,
        )
    return simulate_scoring(
        arrive, tokens, spec.batcher, res.replicas, latency, noise, speeds, node_of, start, pads=scorer.pads
    )


def _scorer_speeds(inputs: StepInputs, engine_end: np.ndarray) -> list[SpeedProfile]:
    """Each node's scorer speed while its engines generate (from the step's start until an engine's last
    rollout is done), slowed by the contention entry's ``score_slowdown``."""
    res, slowdown = inputs.resources, inputs.contention.score_slowdown
    per = res.engines_per_node
    return [
        SpeedProfile.from_ends(engine_end[n * per : (n + 1) * per].tolist(), per, slowdown) for n in range(res.nodes)
    ]


def _score_function(
    inputs: StepInputs, batch: EngineBatch, finish: np.ndarray, seed: int, step: int, speeds: list[SpeedProfile] | None
) -> ScoringOutcome:
    """Rule-based rewards on the worker pools in the loop's calls: streamed micro-batches of ``batcher.window``
    rollouts as they finish (or every rollout at the end), each cut into batches of ``batcher.batch_size``."""
    res, spec, function = inputs.resources, inputs.spec, inputs.function
    assert function is not None
    n = int(batch.valid.sum())
    arrive = np.zeros(n)
    arrive[batch.index[batch.valid]] = finish[batch.valid]
    service = service_times(function, seed, step, n) * worker_stretch(inputs)
    size = spec.batcher.batch_size or spec.batcher.window
    workers, pools_per_node = pool_shape(inputs)
    pools = res.nodes * pools_per_node
    if schedule_kind(spec.schedule).streams:
        order = np.argsort(arrive, kind="stable")
        chunks, ready = [], []
        for call in chunked(order, spec.batcher.window):
            for part in chunked(call, size):
                chunks.append(part)
                ready.append(float(arrive[call].max()))
        return score_in_chunks(chunks, ready, service, pools, workers, pools_per_node, speeds)
    start = float(finish.max())
    chunks = chunked(np.arange(n), size)
    return score_in_chunks(chunks, [start] * len(chunks), service, pools, workers, pools_per_node, None, start)


def pool_shape(inputs: StepInputs) -> tuple[int, int]:
    """(worker processes per pool, pools per node) of a rule-based reward: ``placement.pool_workers`` each
    (None: one pool of every one of the node's ``replicas_per_node`` workers), as many pools as that leaves."""
    per_node = inputs.resources.replicas_per_node
    workers = min(inputs.spec.pool_workers or per_node, per_node)
    return workers, max(per_node // workers, 1)


def worker_stretch(inputs: StepInputs) -> float:
    """How much longer a check takes when more checks run at once on a node than it has scoring cores (they share
    them): at most ``min(pool_workers, batch)`` per actor, times the node's actors."""
    res, batcher = inputs.resources, inputs.spec.batcher
    workers, pools_per_node = pool_shape(inputs)
    at_once = min(workers, batcher.batch_size or batcher.window) * pools_per_node
    return max(1.0, at_once / res.scoring_units_per_node)


def _generation_speeds(outcome: ScoringOutcome, res: Resources, slowdown: float) -> list[SpeedProfile]:
    speeds = []
    for node in range(res.nodes):
        reps = range(node * res.replicas_per_node, (node + 1) * res.replicas_per_node)
        starts = [s for r in reps for s in outcome.busy_starts[r]]
        ends = [e for r in reps for e in outcome.busy_ends[r]]
        speeds.append(SpeedProfile.from_load(starts, ends, res.replicas_per_node, slowdown))
    return speeds


def _assemble(
    inputs: StepInputs,
    batch: EngineBatch,
    finish: np.ndarray,
    engine_end: np.ndarray,
    outcome: ScoringOutcome,
    tokens: int,
    rounds: int,
) -> StepResult:
    res, trainer = inputs.resources, inputs.profile.trainer
    assert trainer is not None
    steps_s = 0.0  # the profiled one-step update needs no reordering: skip it on the hot path
    if not inputs.update.one_step:
        ordered = trainer_order(inputs, batch, finish)
        steps_s = extra_actor_s(inputs.profile.roles, *ordered, inputs.update, res.train_units)
    gen_done = float(engine_end.max())
    rewards_done = max(outcome.done_s, gen_done)
    time_s = {
        "generate": gen_done,
        "score": union_s(outcome),
        "score_tail": rewards_done - gen_done,
        "update": trainer.update_s(
            tokens,
            res.train_units,
            int(batch.valid.sum()),
            float(batch.prompts[batch.valid].sum()),
            res.train_node_count,
        )
        + steps_s,
        "sync": trainer.sync_split_s(tokens) if res.train_nodes else trainer.sync_s(tokens),
        "idle": trainer.step_overhead_s,
    }
    time_s["total"] = sum(time_s[p] for p in CRITICAL_PATH)
    return StepResult(
        time_s=time_s,
        rollouts=int(batch.valid.sum()),
        tokens=tokens,
        gen_busy_unit_s=float(engine_end.sum()) * res.engine_units,
        score_busy_unit_s=outcome.busy_s() * res.replica_units,
        engine_makespan_mean_s=float(engine_end[batch.valid.any(axis=1)].mean()),
        engine_makespan_max_s=gen_done,
        idle_engines=int((~batch.valid.any(axis=1)).sum()),
        batches=outcome.batches,
        padding_waste=1.0 - outcome.real_tokens / outcome.padded_tokens if outcome.padded_tokens else 0.0,
        rounds=rounds,
    )
