"""PPO's four roles in one simulated step: the reference and the critic beside the scorers, then the
actor and critic updates. The step simulated is ``rlsim.loop.schedules.ppo``'s:

- Experience: sequential, each role gets every rollout in one call when generation ends (the scorers
  their slices, as ``step.py`` simulates them); overlapped, each micro-batch of ``micro_batch``
  finished rollouts goes to a scorer, the reference and the critic when its last rollout is generated.
  A reference or critic call costs ``profile.roles`` per micro-batch of its own size (sorted by
  length, padded to the longest), on the scoring cores. Every process on those cores shares them
  (``core_sharing``): colocated roles take turns, the others split the cores (losing the
  ``sharing_efficiency`` measured at their thread count while they want more threads than the cores
  hold); while generation runs on them too (shared placement, overlapped), it is one more claimant of
  that pool, with the claim and the pool's throughput the profile's contention entry implies
  (``core_sharing.GenerationClaim``): with one pool's worth of processes busy this is the scorers'
  contention model, with more they split the pool beside generation rather than being slowed twice.
- Then the advantages (the policy's forward on the trainer, costed as ``roles.reference["eager"]``:
  the same model and computation), then the actor update (the trainer's measured update minus that
  forward) and the critic update sent at once: sharing the cores, or in turn when colocated.

``score_tail`` of a PPO step is the wait after generation for every experience output (rewards,
reference log-probs, values), not for the rewards alone. Modelled on one node, as the loop runs.
The critic's update is cut into the trainer's mini-batches and epochs (``sim/update_steps.py``).
Approximations: scorer batches keep the composition they
have with the scorers alone (a dynamic batcher would batch differently when slowed).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rlsim.planner.profile.schema import ScorerLatencyModel
from rlsim.planner.sim.core_sharing import Call, GenerationClaim, StepFn, busy_intervals, share_cores
from rlsim.planner.sim.events import SpeedProfile
from rlsim.planner.sim.scoring import ScoringOutcome
from rlsim.planner.sim.step_types import StepInputs, StepResult, union_s
from rlsim.planner.sim.update_steps import UpdateShape, critic_update_s
from rlsim.planner.spec.placement import PlacementError
from rlsim.schedule_kinds import schedule_kind

if TYPE_CHECKING:
    from rlsim.planner.sim.generation import EngineBatch

# The time_s keys a step with these roles adds (the loop's ``EXPERIENCE_PHASES``).
ROLE_PHASES = ("reference", "values", "advantages", "update_actor", "update_critic")
_RANK = {"scorer": 0, "reference": 1, "values": 2}  # the order the loop sends a micro-batch's calls


@dataclass(frozen=True)
class RolesSpec:
    """The extra roles of a loop config: the reference on ``reference_runtime`` (None: no KL), the
    critic (PPO), the micro-batch sizes of the loop and of each model, and ``placement.colocate``."""

    reference_runtime: str | None = None
    critic: bool = False
    micro_batch: int = 8
    reference_micro_batch: int = 16
    critic_micro_batch: int = 16
    trainer_micro_batch: int = 16
    colocate: tuple[tuple[str, ...], ...] = ()

    def process(self, role: str) -> str:
        """The process ``role`` runs in: its colocation group (``reference+scorer``) or its own."""
        group = next((g for g in self.colocate if role in g), None)
        return "+".join(group) if group else role


def check_roles(inputs: StepInputs) -> None:
    """Raise before simulating what this model does not cover, or a profile without ``roles``."""
    roles = inputs.roles
    if roles is None:
        return
    inputs.profile.require_roles(roles.reference_runtime, roles.critic)
    if inputs.function is not None:
        raise PlacementError(
            f"the reference and critic are modelled beside a scoring model, not the rule-based reward "
            f"{inputs.spec.runtime!r}; use a reward-model runtime"
        )
    if inputs.resources.nodes != 1 or inputs.resources.train_nodes:
        raise PlacementError(
            "the reference and critic are modelled on one node (one actor each, as `rlsim run` places "
            "them); plan PPO on one node"
        )


def call_s(model: ScorerLatencyModel, tokens: np.ndarray, micro_batch: int, units: float) -> float:
    """Seconds of one call on rollouts of ``tokens`` (prompt + response each), alone on ``units``:
    micro-batches of ``micro_batch`` sorted by length, each padded to its longest."""
    if len(tokens) == 0:
        return 0.0
    order = np.sort(tokens)
    parts = (order[j : j + micro_batch] for j in range(0, len(order), micro_batch))
    compute = sum(model.latency_s(len(p), int(p.max()) * len(p), units) for p in parts)
    return compute * model.in_loop_factor + model.call_overhead_s


def _engines_busy(engine_end: np.ndarray, engines: int) -> StepFn:
    """The share of the node's ``engines`` still generating at t (each until its last rollout is done)."""
    ends = np.sort(engine_end)

    def busy(t: float) -> tuple[float, float]:
        done = int(np.searchsorted(ends, t, side="right"))
        nxt = float(ends[done]) if done < len(ends) else float("inf")
        return (len(ends) - done) / engines, nxt

    return busy


@dataclass(frozen=True)
class Experience:
    """The experience phase of one step, timed: the scorers (re-timed beside the roles), every call."""

    scoring: ScoringOutcome
    calls: list[Call]
    gen_done: float
    weights: dict[str, float]  # units each process wants
    pool: float  # units of the scoring cores they share
    generation: GenerationClaim | None  # generation on those cores (None: it slows nothing there)

    @property
    def done_s(self) -> float:
        """When the last experience output (reward, log-prob, value) is ready."""
        return max([self.gen_done, self.scoring.done_s] + [c.end for c in self.calls])

    def generation_speeds(self) -> list[SpeedProfile]:
        """Generation's speed beside the scorers and the roles: its share of the pool while the busy processes
        want ``pools`` of it (``GenerationClaim.generation_rate``); full speed without contention."""
        generation = self.generation
        if generation is None:
            return [SpeedProfile.constant()]
        events = sorted(
            [(c.start, self.weights[c.process]) for c in self.calls if not math.isnan(c.end)]
            + [(c.end, -self.weights[c.process]) for c in self.calls if not math.isnan(c.end)]
        )
        times, speeds, wanted = [0.0], [1.0], 0.0
        for t, delta in events:
            wanted += delta
            speed = generation.generation_rate(max(wanted, 0.0) / self.pool)
            if t == times[-1]:
                speeds[-1] = speed
            else:
                times.append(t)
                speeds.append(speed)
        return [SpeedProfile(times, speeds)]

    def assemble(
        self, result: StepResult, inputs: StepInputs, batch: EngineBatch, ordered: tuple[np.ndarray, np.ndarray]
    ) -> StepResult:
        """``result`` (from ``step._assemble``) with the experience tail and the PPO update; ``ordered``:
        the rollouts' prompt + response and response tokens in the order the trainer and critic get them."""
        roles, res = inputs.roles, inputs.resources
        assert roles is not None and inputs.profile.roles is not None
        model = inputs.profile.roles
        tokens = (batch.prompts + batch.responses)[batch.valid]
        pool = res.scoring_units_per_node
        forward = call_s(model.reference["eager"], tokens, roles.trainer_micro_batch, res.train_units)
        # result's "update" is the trainer's measured update, which includes the policy's forward.
        updates = [Call(roles.process("trainer"), "update_actor", 0.0, max(result.time_s["update"] - forward, 0.0))]
        weights = {updates[0].process: min(res.train_units, pool)}
        if roles.critic:
            shape = UpdateShape(roles.critic_micro_batch, inputs.update.mini_batch_size, inputs.update.epochs)
            work = critic_update_s(model, *ordered, shape, pool)
            updates.append(Call(roles.process("critic"), "update_critic", 0.0, work, 1))
            weights[updates[1].process] = max(weights.get(updates[1].process, 0.0), pool)
        # The loop puts the trainer on the scoring cores (split) or on every core (shared): one pool.
        span = share_cores(updates, weights, pool, efficiency=model.efficiency(max(weights.values())))
        t = dict(result.time_s)
        scorer_calls = [c for c in self.calls if c.role.startswith("scorer")]
        t["score"] = _union([(c.start, c.end) for c in scorer_calls])
        tail, update = self.done_s - self.gen_done, forward + span
        # Both replace terms of the critical path, so the total moves by their differences.
        t["total"] += (tail - t["score_tail"]) + (update - t["update"])
        t.update(score_tail=tail, update=update, advantages=forward)
        t["reference"] = _union(busy_intervals(self.calls, "reference"))
        t["values"] = _union(busy_intervals(self.calls, "values"))
        t["update_actor"] = _union(busy_intervals(updates, "update_actor"))
        t["update_critic"] = _union(busy_intervals(updates, "update_critic"))
        busy = sum(c.end - c.start for c in scorer_calls)
        return dataclasses.replace(result, time_s=t, score_busy_unit_s=busy * res.replica_units)


def run_experience(
    inputs: StepInputs,
    batch: EngineBatch,
    finish: np.ndarray,
    engine_end: np.ndarray,
    outcome: ScoringOutcome,
    scorer_speed: SpeedProfile | None,
) -> Experience:
    """The scorers' batches of ``outcome`` plus the reference and critic calls, sharing the scoring cores.
    ``scorer_speed``: the speed ``outcome``'s batches ran at beside generation (None: not contended)."""
    roles, res, spec = inputs.roles, inputs.resources, inputs.spec
    assert roles is not None and inputs.profile.roles is not None
    model = inputs.profile.roles
    pool = res.scoring_units_per_node
    work_of = scorer_speed or SpeedProfile.constant()
    gen_done = float(engine_end.max())
    n = int(batch.valid.sum())
    arrive, tokens = np.zeros(n), np.zeros(n, dtype=np.int64)
    arrive[batch.index[batch.valid]] = finish[batch.valid]
    tokens[batch.index[batch.valid]] = (batch.prompts + batch.responses)[batch.valid]
    parts = _experience_calls(arrive, gen_done, spec.schedule, roles.micro_batch)
    releases = _batch_releases(outcome, parts, spec.schedule, spec.dispatch, gen_done)
    calls, weights = [], {}
    for r, (starts, ends) in enumerate(zip(outcome.busy_starts, outcome.busy_ends, strict=True)):
        proc = roles.process("scorer") if r == 0 else f"scorer-{r}"
        weights[proc] = res.replica_units
        # Uncontended work of each batch, so the shared speed (generation's and the roles') re-times it.
        calls += [
            Call(proc, f"scorer-{r}", sent, work_of.work_at(e) - work_of.work_at(b), _RANK["scorer"])
            for sent, b, e in zip(releases[r], starts, ends, strict=True)
        ]
    for release, part in parts:
        if roles.reference_runtime is not None:
            ref = model.reference[roles.reference_runtime]
            work = call_s(ref, tokens[part], roles.reference_micro_batch, pool)
            calls.append(Call(roles.process("reference"), "reference", release, work, _RANK["reference"]))
        if roles.critic:
            work = call_s(model.values, tokens[part], roles.critic_micro_batch, pool)
            calls.append(Call(roles.process("critic"), "values", release, work, _RANK["values"]))
    for call in calls:
        wants = res.replica_units if call.role.startswith("scorer") else pool
        weights[call.process] = max(weights.get(call.process, 0.0), wants)
    generation = _contention_claim(inputs, engine_end) if scorer_speed is not None else None
    share_cores(calls, weights, pool, generation, model.efficiency(max(weights.values())))
    return Experience(_retimed(outcome, calls), calls, gen_done, weights, pool, generation)


def _contention_claim(inputs: StepInputs, engine_end: np.ndarray) -> GenerationClaim | None:
    """Generation on the scoring cores as a claimant of their pool, from the profile's contention entry; None
    where the entry measured none (generation and the processes beside it do not slow each other)."""
    busy, c = _engines_busy(engine_end, inputs.resources.engines_per_node), inputs.contention
    if c.score_slowdown <= 0 and c.gen_slowdown <= 0:
        return None
    return GenerationClaim(busy, c.score_slowdown, c.gen_slowdown)


def _experience_calls(
    arrive: np.ndarray, gen_done: float, schedule: str, micro_batch: int
) -> list[tuple[float, np.ndarray]]:
    """``(release s, rollout indices)`` of each reference/critic call: every rollout at the end of
    generation (sequential), or micro-batches in the order rollouts finish (overlapped)."""
    if not schedule_kind(schedule).streams:
        return [(gen_done, np.arange(len(arrive)))]
    order = np.argsort(arrive, kind="stable")
    parts = [order[j : j + micro_batch] for j in range(0, len(order), micro_batch)]
    return [(float(arrive[p].max()), p) for p in parts]


def _batch_releases(
    outcome: ScoringOutcome, parts: list[tuple[float, np.ndarray]], schedule: str, dispatch: str, gen_done: float
) -> list[list[float]]:
    """Per replica, when each scorer batch's call was sent, so that a colocated process serves its calls in
    the order the loop sent them: at generation's end (sequential: one call per replica, sent before the
    reference's), or with the micro-batch its rollouts came in (the loop's round robin); a pool that pulls
    batches (not the loop's) takes each when it started with the scorers alone."""
    if not schedule_kind(schedule).streams:
        return [[gen_done] * len(starts) for starts in outcome.busy_starts]
    if dispatch != "round_robin":
        return [list(starts) for starts in outcome.busy_starts]
    part_of = np.zeros(len(outcome.reward_s), dtype=np.int64)
    for k, (_, rollouts) in enumerate(parts):
        part_of[rollouts] = k
    out = []
    for starts, ends in zip(outcome.busy_starts, outcome.busy_ends, strict=True):
        row = []
        for b, e in zip(starts, ends, strict=True):
            rewarded = np.flatnonzero(outcome.reward_s == e)  # a batch's rollouts get its end as reward time
            row.append(min(parts[int(part_of[rewarded].min())][0], b) if rewarded.size else b)
        out.append(row)
    return out


def _retimed(outcome: ScoringOutcome, calls: list[Call]) -> ScoringOutcome:
    """``outcome`` with each scorer batch at its shared-core times (rewards move with their batch)."""
    starts = [[c.start for c in calls if c.role == f"scorer-{r}"] for r in range(len(outcome.busy_starts))]
    ends = [[c.end for c in calls if c.role == f"scorer-{r}"] for r in range(len(outcome.busy_starts))]
    moved = {
        old: new
        for olds, news in zip(outcome.busy_ends, ends, strict=True)
        for old, new in zip(olds, news, strict=True)
    }
    return dataclasses.replace(
        outcome,
        busy_starts=starts,
        busy_ends=ends,
        done_s=max([outcome.done_s if not moved else 0.0] + [e for es in ends for e in es]),
        reward_s=np.array([moved.get(float(x), float(x)) for x in outcome.reward_s]),
    )


def _union(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by ``intervals`` (overlaps once), by ``step.union_s`` on one replica's list."""
    if not intervals:
        return 0.0
    starts, ends = zip(*intervals, strict=True)
    return union_s(ScoringOutcome(0.0, 0, 0, 0, [list(starts)], [list(ends)]))
