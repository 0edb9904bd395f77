"""What the simulated async pipeline's calls cost on a placement, from the same profile models the
sync step uses (``step.py``), and how workers sharing cores slow each other.

Costs (uncontended seconds): a generate call is one batch dealt to the engines (the call ends with the
slowest engine); a scoring call is its groups cut into batches by the placement's batcher on one replica,
with the in-loop factor and per-call overhead (a rule-based reward's call: its rollouts in batches on one
actor's pool of worker processes, ending with the last check: ``reward_pool``); an update is
the trainer's cost for those rollouts plus the step's orchestration overhead; the engine's weight load is
the profile's sync cost. The weight export on the trainer is taken as free: the profile's sync cost is
measured end to end and charged as the pause.

Contention is the profile's ``ContentionEntry``, applied as ``step.py`` applies it: a worker on shared
units runs at ``1 / (1 + slowdown x load)``, where ``load`` is the busy share of the other workers on
its units (busy scoring replicas / replicas, the engine generating: 1, the trainer updating: 1). The
engine takes ``gen_slowdown``; scorers take ``score_slowdown``. The trainer never overlaps another
stage in the sync schedules, so no slowdown of its own was measured for it. Beside the engine it is
taken to be a scoring-like torch workload (``score_slowdown`` when slowed by generation, counted like
one busy replica set when slowing it). Beside the scorers on the same cores it is what the profile's
``roles.sharing_efficiency`` measures, two torch processes on one pool (``core_sharing``, as PPO's
roles share the scoring cores in ``ppo_roles``): while their threads fit the pool both run at full
speed, beyond it each runs at ``efficiency x pool / threads wanted``. Without a ``roles`` section
the trainer meets the scorers like the engine (``score_slowdown``), the older assumption. Either is an
assumption of the model, listed in the evaluation's ``assumptions``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from rlsim.planner.profile.schema import ContentionEntry
from rlsim.planner.sim.asynchronous.pipeline import ROLLOUT, TRAINER
from rlsim.planner.sim.generation import completion_work_s, deal
from rlsim.planner.sim.reward_pool import chunked, score_in_chunks
from rlsim.planner.sim.scoring import split_call
from rlsim.planner.sim.step import StepInputs, pool_shape, worker_stretch
from rlsim.planner.sim.update_steps import extra_actor_s
from rlsim.planner.spec.placement import Resources

TRAINER_ASSUMPTION = (
    "async: the trainer on shared cores is slowed and slows others like a scorer (score_slowdown); "
    "no trainer slowdown is measured because it never overlaps another stage in the sync schedules"
)
TRAINER_SHARING_ASSUMPTION = (
    "async: the trainer beside generation is slowed and slows it like a scorer (score_slowdown); beside "
    "the scorers it shares their cores as two torch processes do (roles.sharing_efficiency {efficiency:.2f}); "
    "no trainer slowdown is measured because it never overlaps another stage in the sync schedules"
)


class ProfileCosts:
    """``StageCosts`` of a placement: batch ``k`` draws ``workload.sample_step(seed, k)`` (the loop's batch
    ``k`` draws the prompts of its step ``k + 1``, which ``runs.predict`` replays)."""

    def __init__(self, inputs: StepInputs, seed: int) -> None:
        self._in, self._seed = inputs, seed
        self._batches: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._sigma = inputs.scorer.fit.residual_rel_std if inputs.noise and inputs.function is None else 0.0
        # Scoring noise draws from a stream of its own, never the lengths' ``[seed, batch]`` streams.
        self._noise = np.random.default_rng([seed, 1, 1])

    def _lengths(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        if batch not in self._batches:
            self._batches[batch] = self._in.workload.sample_step(self._seed, batch)
        return self._batches[batch]

    def _rollouts(self, groups: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Prompt and response tokens of every rollout of ``groups`` (global group numbers)."""
        per, g = self._in.workload.prompts_per_step, self._in.workload.group_size
        prompts, responses = [], []
        for group in groups:
            p, r = self._lengths(group // per)
            rows = slice((group % per) * g, (group % per + 1) * g)
            prompts.append(p[rows])
            responses.append(r[rows])
        return np.concatenate(prompts), np.concatenate(responses)

    def generate_s(self, batch: int) -> float:
        res, gen = self._in.resources, self._in.profile.generation
        assert gen is not None
        prompts, responses = self._lengths(batch)
        dealt = deal(prompts, responses, res.engines)
        return float(completion_work_s(dealt, gen, res.engine_units, res.max_running, res.tp, res.pp).max())

    def score_s(self, groups: Sequence[int]) -> float:
        if self._in.function is not None:
            return self._pool_s(groups)
        res, spec, scorer = self._in.resources, self._in.spec, self._in.scorer
        prompts, responses = self._rollouts(groups)
        tokens = np.minimum(prompts + responses, spec.max_length or scorer.max_length)
        seconds = scorer.call_overhead_s
        for batch in split_call(np.arange(len(tokens)), tokens, spec.batcher):
            padded = scorer.batch_tokens(tokens[batch])
            seconds += scorer.latency_s(len(batch), padded, res.replica_units) * scorer.in_loop_factor * self._draw()
        return seconds

    def _pool_s(self, groups: Sequence[int]) -> float:
        """A rule-based reward's call on one scoring actor: its rollouts in batches of ``batcher.batch_size``,
        each spread over the actor's worker processes (``step.pool_shape``); the call ends with its last batch's
        last check. The service times are drawn per call from a stream of their own (``[seed, 2, first group]``)."""
        function, spec = self._in.function, self._in.spec
        assert function is not None
        n = len(groups) * self._in.workload.group_size
        service = function.sample(np.random.default_rng([self._seed, 2, groups[0]]), n) * worker_stretch(self._in)
        workers, _ = pool_shape(self._in)
        chunks = chunked(np.arange(n), spec.batcher.batch_size or spec.batcher.window)
        return score_in_chunks(chunks, [0.0] * len(chunks), service, 1, workers, 1).done_s

    def _draw(self) -> float:
        """A mean-one lognormal multiplier with the scorer fit's residual spread (1.0 without noise)."""
        s = self._sigma
        return float(self._noise.lognormal(-(s**2) / 2.0, s)) if s > 0 else 1.0

    def update_s(self, groups: Sequence[int]) -> float:
        res, trainer = self._in.resources, self._in.profile.trainer
        assert trainer is not None
        prompts, responses = self._rollouts(groups)
        update = trainer.update_s(
            float(responses.sum()), res.train_units, len(responses), float(prompts.sum()), res.train_node_count
        )
        # The trainer gets the batch's groups in queue order (sim/update_steps.py prices its optimizer steps).
        steps = extra_actor_s(self._in.profile.roles, prompts + responses, responses, self._in.update, res.train_units)
        return update + steps + trainer.step_overhead_s

    def response_tokens(self, groups: Sequence[int]) -> int:
        """Generated tokens of ``groups`` (what the update and the sync are fitted against)."""
        return int(self._rollouts(groups)[1].sum())

    def sync_s(self, groups: Sequence[int]) -> float:
        res, trainer = self._in.resources, self._in.profile.trainer
        assert trainer is not None
        tokens = float(self.response_tokens(groups))
        return trainer.sync_split_s(tokens) if res.train_nodes else trainer.sync_s(tokens)


class SharedCores:
    """``Speeds`` of the workers of ``res`` under ``entry`` (see the module docstring). ``efficiency``:
    the profile's ``roles.sharing_efficiency`` (None: no roles section, the scorer-like assumption)."""

    def __init__(
        self, res: Resources, entry: ContentionEntry, efficiency: float | None = None, scorers: int | None = None
    ) -> None:
        own_trainer = res.train_nodes > 0
        # ``scorers``: the pipeline's scoring workers when they are not the replicas (a rule-based reward:
        # one pool of ``replicas_per_node`` worker processes per node).
        self.entry, self.replicas, self.efficiency = entry, scorers or res.replicas, efficiency
        self.gen_with_scoring = res.shared
        self.trainer_with_gen = not own_trainer and (res.shared or not res.train_on_scoring)
        self.trainer_with_scoring = not own_trainer and (res.shared or res.train_on_scoring)
        self.pool, self.replicas_per_node = res.scoring_units_per_node, res.replicas_per_node
        self.replica_threads, self.trainer_threads = self.threads(res)

    @staticmethod
    def threads(res: Resources) -> tuple[float, float]:
        """Threads a scorer replica and the trainer want on the scoring pool of one node (as ``ppo_roles``
        weighs them): the sharing efficiency is read at the larger."""
        pool = res.scoring_units_per_node
        return min(res.replica_units, pool), min(res.train_units / res.nodes, pool)

    @property
    def trainer_contends(self) -> bool:
        """Whether the trainer shares units with another stage (the assumption above then matters)."""
        return self.trainer_with_gen or self.trainer_with_scoring

    def assumption(self) -> str:
        """The line the evaluation lists for the trainer's contention."""
        if self.efficiency is None:
            return TRAINER_ASSUMPTION
        return TRAINER_SHARING_ASSUMPTION.format(efficiency=self.efficiency)

    def _pool_rate(self, scoring: float, updating: float) -> float:
        """Speed of each busy torch process (scorers, trainer) on a node's scoring pool, from their threads;
        ``scoring``: the busy share of the scorer replicas (spread evenly over the nodes)."""
        demand = scoring * self.replicas_per_node * self.replica_threads + updating * self.trainer_threads
        if self.efficiency is None or demand <= self.pool:
            return 1.0
        return self.efficiency * self.pool / demand

    def __call__(self, running: Mapping[str, str]) -> Mapping[str, float]:
        generating = float(running.get(ROLLOUT) == "generate")
        updating = float(running.get(TRAINER) == "update")
        scoring = sum(1 for w, p in running.items() if p == "score") / self.replicas
        gen_load = self.gen_with_scoring * scoring + self.trainer_with_gen * updating
        if self.efficiency is None:  # the trainer meets the scorers like the engine does
            score_load = self.gen_with_scoring * generating + self.trainer_with_scoring * updating
            train_load = self.trainer_with_gen * generating + self.trainer_with_scoring * scoring
            pool = 1.0
        else:  # the engine's slowdown on either, and the pool shared between them
            score_load = self.gen_with_scoring * generating
            train_load = self.trainer_with_gen * generating
            pool = self._pool_rate(scoring, updating) if self.trainer_with_scoring and updating else 1.0
        out = {}
        for worker, phase in running.items():
            if phase == "generate":
                out[worker] = 1.0 / (1.0 + self.entry.gen_slowdown * gen_load)
            elif phase == "score":
                out[worker] = pool / (1.0 + self.entry.score_slowdown * score_load)
            elif phase == "update":
                out[worker] = pool / (1.0 + self.entry.score_slowdown * train_load)
            else:  # the engine's weight load: a copy, not the compute the slowdowns were measured on
                out[worker] = 1.0
        return out
