"""Time PPO's reference and critic directly (the measuring side of the profile's ``roles`` section).

The models are the loop's own (``rlsim.loop.roles.reference``, ``rlsim.loop.roles.critic``) on the policy the
loop trains, called the way their actors call them: ``logprobs`` (per reference runtime),
``values`` and ``update``, and the policy trainer's ``update`` (the actor's forward, backward and
one optimizer step, whose clip + AdamW step is also timed alone) on synthetic rollouts of
``prompt_tokens`` + each response length, on
``units`` threads. Each cell (sequences x response length) is warmed up once, then timed ``repeats``
times; every timed call is one ``LatencySample`` (one micro-batch: batch sizes are at most
``micro_batch``), which ``fit_latency_model`` turns into the same latency model a scorer has.

``measure_sharing`` times what two such processes lose on the same cores, once per thread count
``u`` of ``units``: two processes (spawned, pinned to the same ``u`` cores, ``u`` threads each, built
and warmed up once) run the critic's update at once, against one of them alone while the other waits;
``efficiency = 2 x alone / together`` (1: the cores did as much work as alone). Multi-threaded
processes lose more than single-threaded ones: torch's OpenMP workers spin at their barriers while
the other process holds a core, which one thread never does.

Like ``measure.scorers``, models and torch are imported inside the functions, so ``rlsim plan``
never loads them.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlsim.errors import RlsimError
from rlsim.logs import quiet_transformers
from rlsim.models import resolve_policy
from rlsim.planner.measure.scorers import timed_call
from rlsim.planner.profile.schema import LatencySample, UpdateSample
from rlsim.rollout.types import Rollout

if TYPE_CHECKING:
    from rlsim.planner.measure.loop_set import QuietGate
    from rlsim.rollout.types import Rollout

# Sample keys: the reference per runtime, then the critic's forward and update, then the actor's update.
CRITIC_OPS = ("values", "update_critic")


@dataclass
class RolesSamples:
    """What ``measure_roles`` timed: latency samples per key, the policy's context length (tokens), and
    per updating role (``actor``, ``critic``) and thread count the seconds of each gradient clip +
    AdamW step (``optimizer_seconds`` of the loop's own trainer and critic)."""

    samples: dict[str, list[LatencySample]]
    context: int
    optimizer: dict[str, dict[int, list[float]]] = field(default_factory=dict)


class RolesGrid(BaseModel):
    """What ``rlsim profile`` times for the ``roles`` section (``roles:`` in the profile YAML)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    policy: str = Field(default="tiny-llama", description="the policy the reference and critic copy")
    reference_runtimes: list[Literal["eager", "ort"]] = Field(default=["eager", "ort"], min_length=1)
    batch_sizes: list[int] = Field(default=[4, 16], min_length=2, description="sequences per timed call")
    lengths: list[int] = Field(default=[48, 160], min_length=2, description="response tokens per sequence")
    prompt_tokens: int = Field(default=32, ge=1)
    units: list[int] = Field(default=[1, 2], min_length=1, description="threads to time at")
    repeats: int = Field(default=2, ge=1)
    micro_batch: int = Field(default=16, ge=1, description="the reference's and critic's micro-batch")
    sharing: bool = Field(
        default=True, description="measure sharing_efficiency (two processes, per thread count: ~30 s each)"
    )

    @model_validator(mode="after")
    def _check(self) -> RolesGrid:
        problems = []
        if "eager" not in self.reference_runtimes:
            problems.append("reference_runtimes needs eager: the policy's own forward (the advantages pass)")
        if max(self.batch_sizes) > self.micro_batch:
            problems.append(
                f"batch_sizes up to {max(self.batch_sizes)} exceed micro_batch {self.micro_batch}: "
                "each timed call must be one micro-batch"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def calls(self) -> int:
        """Timed calls in all, warm-ups included (for ``--dry-run``)."""
        ops = len(self.reference_runtimes) + len(CRITIC_OPS) + 1  # + the actor's update
        ragged = sum(1 for b in self.batch_sizes if b > 1)  # the actor's ragged cell per batch size
        cells = len(self.batch_sizes) * len(self.lengths) * ops + ragged
        return len(self.units) * cells * (self.repeats + 1)


def ragged_rollouts(batch: int, grid: RolesGrid, vocab: int) -> tuple[list[Rollout], int]:
    """``batch`` rollouts, every other one of the grid's shortest and longest response (the short ones padded
    to the long in one micro-batch), and their response tokens."""
    short = synthetic_rollouts(batch - batch // 2, grid.prompt_tokens, min(grid.lengths), vocab, salt=1)
    long = synthetic_rollouts(batch // 2, grid.prompt_tokens, max(grid.lengths), vocab, salt=2)
    mixed = [r for pair in zip(short, long, strict=False) for r in pair] + short[len(long) :]
    rollouts = [
        Rollout(uid=i, group=i, prompt_ids=r.prompt_ids, response_ids=r.response_ids) for i, r in enumerate(mixed)
    ]
    return rollouts, sum(len(r.response_ids) for r in rollouts)


def synthetic_rollouts(count: int, prompt: int, response: int, vocab: int, salt: int = 0) -> list[Rollout]:
    """``count`` rollouts of ``prompt`` + ``response`` token ids in ``[1, vocab)`` (random, seeded)."""
    rng = np.random.default_rng([count, prompt, response, salt])
    ids = rng.integers(1, vocab, size=(count, prompt + response)).tolist()
    return [Rollout(uid=i, group=i, prompt_ids=row[:prompt], response_ids=row[prompt:]) for i, row in enumerate(ids)]


def measure_roles(
    grid: RolesGrid,
    on_cell: Callable[[str], None] | None = None,
    quiet: QuietGate | None = None,
    only: tuple[str, ...] | None = None,
) -> RolesSamples:
    """Samples per key (``reference:eager``, ``reference:ort``, ``values``, ``update_critic``,
    ``update_actor``), the context length and the optimizer steps' seconds. ``quiet``: wait for idle
    cores before each cell. ``only``: time these keys alone (what a stored profile lacks)."""
    policy_dir = resolve_policy(grid.policy)
    config = json.loads((policy_dir / "config.json").read_text())
    out = RolesSamples({}, int(config.get("max_position_embeddings") or grid.prompt_tokens + max(grid.lengths)))
    for units in grid.units:
        optimizer = {"update_critic": [], "update_actor": []}  # type: dict[str, list[float]]
        with quiet_transformers():  # no "Loading weights" bars through the profile's progress (unless -v)
            ops = _operations(policy_dir, grid, units, optimizer, only)
        for batch in grid.batch_sizes:
            for length in grid.lengths:
                rollouts = synthetic_rollouts(batch, grid.prompt_tokens, length, int(config["vocab_size"]))
                if quiet is not None:
                    quiet.wait()
                padded = batch * (grid.prompt_tokens + length)
                for key, op in ops.items():
                    response = batch * length if key == "update_actor" else None
                    timed = _time_cell(op, rollouts, padded, units, grid.repeats, response)
                    out.samples.setdefault(key, []).extend(timed)
                if on_cell:
                    on_cell(f"roles x{units} b{batch} len{length}")
            if "update_actor" in ops and batch > 1:  # ragged: the padding's own cost (the cells above have none)
                rollouts, response = ragged_rollouts(batch, grid, int(config["vocab_size"]))
                padded = batch * (grid.prompt_tokens + max(grid.lengths))
                timed = _time_cell(ops["update_actor"], rollouts, padded, units, grid.repeats, response)
                out.samples["update_actor"].extend(timed)
        for key, seconds in optimizer.items():
            if seconds:
                out.optimizer.setdefault(key.removeprefix("update_"), {})[units] = seconds
    return out


def _operations(
    policy_dir: Any,
    grid: RolesGrid,
    units: int,
    optimizer: dict[str, list[float]],
    only: tuple[str, ...] | None = None,
) -> dict[str, Callable[[list[Rollout]], object]]:
    """The calls to time on ``units`` threads, each taking the cell's rollouts; the updates append
    their optimizer steps' seconds to ``optimizer[key]``."""
    from rlsim.loop.roles.critic import CriticModel, CriticSettings
    from rlsim.loop.roles.reference import ReferenceSettings, make_reference
    from rlsim.loop.roles.trainer import PolicyTrainer, TrainerSettings

    wanted = (lambda key: True) if only is None else (lambda key: key in only)
    ops: dict[str, Callable[[list[Rollout]], object]] = {}
    for runtime in grid.reference_runtimes:
        if wanted(f"reference:{runtime}"):
            ops[f"reference:{runtime}"] = make_reference(
                policy_dir, ReferenceSettings(runtime, grid.micro_batch, "cpu", units)
            ).logprobs
    if wanted("values") or wanted("update_critic"):
        critic = CriticModel(policy_dir, CriticSettings(micro_batch=grid.micro_batch, threads=units))

        def update_critic(rollouts: list[Rollout]) -> object:
            zeros = {x.uid: np.zeros(len(x.response_ids), dtype=np.float32) for x in rollouts}
            stats = critic.update(rollouts, zeros, zeros)
            optimizer["update_critic"] += stats.optimizer_seconds or []
            return stats

        if wanted("values"):
            ops["values"] = critic.values
        if wanted("update_critic"):
            ops["update_critic"] = update_critic
    if wanted("update_actor"):
        trainer = PolicyTrainer(policy_dir, TrainerSettings(micro_batch=grid.micro_batch, threads=units))
        cell: dict[str, Any] = {}  # the cell's experience, made on its warm-up call: only the update is timed

        def update_actor(rollouts: list[Rollout]) -> object:
            if cell.get("rollouts") is not rollouts:
                cell.update(rollouts=rollouts, exp=trainer.experience(rollouts, {x.uid: 0.0 for x in rollouts}))
            stats = trainer.update(rollouts, cell["exp"])
            optimizer["update_actor"] += stats.optimizer_seconds or []
            return stats

        ops["update_actor"] = update_actor
    return ops


def _time_cell(
    op: Callable[[list[Rollout]], object],
    rollouts: list[Rollout],
    padded: int,
    units: int,
    repeats: int,
    response: int | None = None,
) -> list[LatencySample]:
    """``repeats`` timed calls after a warm-up; ``response``: the cell's response tokens, recorded
    (``UpdateSample``) for the policy update, whose cost follows them as well as the padding."""
    op(rollouts)  # warm-up: first-call allocations and kernel choices are not the steady state
    out: list[LatencySample] = []
    for _ in range(repeats):
        elapsed, share = timed_call(lambda: op(rollouts))
        sample = LatencySample(
            batch=len(rollouts),
            padded_tokens=padded,
            latency_s=elapsed,
            units=units,
            foreign_share=None if share is None else round(share, 4),
        )
        out.append(sample if response is None else UpdateSample(**sample.model_dump(), response_tokens=response))
    return out


def measure_sharing(grid: RolesGrid, quiet: QuietGate | None = None) -> dict[int, float]:
    """``sharing_efficiency`` per thread count of ``grid.units`` (see the module doc), each capped at 1;
    RlsimError if a worker fails."""
    policy_dir = resolve_policy(grid.policy)
    vocab = int(json.loads((policy_dir / "config.json").read_text())["vocab_size"])
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: torch's threads are its own
    out = {}
    for units in sorted(set(grid.units)):
        cores = sorted(os.sched_getaffinity(0))[:units]
        if quiet is not None:
            quiet.wait()
        alone, both = _alone_then_together(context, (str(policy_dir), grid, units, cores, vocab))
        out[units] = min(1.0, 2.0 * alone / both)
    return out


def _alone_then_together(context: Any, work: tuple[Any, ...]) -> tuple[float, float]:
    """Two worker processes, built and warmed up once: seconds of the first one's timed updates while
    the other waits, then until the last of both finishes the same updates started at once."""
    barrier, results = context.Barrier(3), context.Queue()
    procs = [context.Process(target=_critic_updates, args=(*work, rank, barrier, results)) for rank in (0, 1)]
    for p in procs:
        p.start()
    try:
        barrier.wait(timeout=300)  # both models built and warmed up: the first one runs alone
        alone = results.get(timeout=600)
        barrier.wait(timeout=600)  # then both at once
        return alone, max(results.get(timeout=600) for _ in procs)
    except Exception as err:  # a dead worker breaks the barrier or never answers
        raise RlsimError(
            f"measuring the roles' sharing efficiency failed ({type(err).__name__}); see the worker's error above, "
            "or set roles.sharing: false"
        ) from None
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()


def _critic_updates(
    policy_dir: str,
    grid: RolesGrid,
    units: int,
    cores: list[int],
    vocab: int,
    rank: int,
    barrier: Any,
    results: Any,
) -> None:
    """One worker process: the critic's update on the grid's largest cell, ``repeats + 1`` times, alone
    (rank 0 only, while rank 1 waits) and then beside the other worker."""
    os.sched_setaffinity(0, cores)

    from rlsim.loop.roles.critic import CriticModel, CriticSettings

    with quiet_transformers():
        critic = CriticModel(Path(policy_dir), CriticSettings(micro_batch=grid.micro_batch, threads=units))
    rollouts = synthetic_rollouts(max(grid.batch_sizes), grid.prompt_tokens, max(grid.lengths), vocab)
    zeros = {x.uid: np.zeros(len(x.response_ids), dtype=np.float32) for x in rollouts}

    def timed() -> float:
        t0 = time.perf_counter()
        for _ in range(grid.repeats + 1):
            critic.update(rollouts, zeros, zeros)
        return time.perf_counter() - t0

    critic.update(rollouts, zeros, zeros)  # warm-up
    barrier.wait(timeout=300)
    if rank == 0:
        results.put(timed())
    barrier.wait(timeout=600)
    results.put(timed())
