"""The loop driver: start Ray (or join a cluster), place the actors, run steps, record everything.

``LoopSession`` owns one set of actors and runs steps on them under either schedule (the schedule is
the driver's choice alone, so one session can run both: the tests do). ``run_loop`` is what
``rlsim run`` calls: a session, a progress bar, and the outputs rewritten after every step.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, cast

import ray

from rlsim.actors.ray_actors import ActorSet, create_actors
from rlsim.actors.ray_session import connect_ray
from rlsim.errors import RlsimError
from rlsim.fingerprint import machine_fingerprint
from rlsim.loop.backends.faults import FaultPlan
from rlsim.loop.backends.ray import RayBackend
from rlsim.loop.config import RunConfig
from rlsim.loop.config.algorithm import run_roles
from rlsim.loop.outputs.records import step_record, timeline_rows
from rlsim.loop.roles.build import factories
from rlsim.loop.schedules.ppo import run_ppo_step
from rlsim.loop.schedules.step import Progress, Schedule, run_step
from rlsim.loop.sync import WeightSync
from rlsim.models import resolve_policy, resolve_reward_model
from rlsim.placement import EXPERIENCE_ROLES, ResolvedPlacement, resolve_placement
from rlsim.rollout.prompts import make_step_requests
from rlsim.rollout.types import RolloutRequest
from rlsim.run_results import StepRecord
from rlsim.schedule_kinds import schedule_kind


class LoopSession:
    """Actors for one config. ``start()`` then ``step(k)`` any number of times, then ``close()``.

    ``rollout``: another session's running rollout actor to generate with instead of starting an engine (one
    engine serving sessions of several algorithms or schedules in turn, as the loop tests do); it must have been
    built for this config's generator (checked at start), holds this session's initial weights once started, and
    is left running by ``close``."""

    def __init__(self, config: RunConfig, rollout: Any = None) -> None:
        self.config = config
        self.rollout = rollout
        self.placements: dict[str, ResolvedPlacement] = {}
        self.actors: ActorSet | None = None
        self.backend: RayBackend | None = None
        self.startup_s: dict[str, float] = {}
        self._started_ray = False
        # The reference and/or the critic run: the step is rlsim.loop.schedules.ppo's, not the GRPO one.
        self.experience_roles = [r for r in run_roles(config) if r in EXPERIENCE_ROLES]
        self.async_run: Any = (
            None  # schedule async: its AsyncRun (rlsim.loop.schedules.asynchronous.session), made at step 1
        )
        self.async_start: Any = None  # schedule async: its AsyncStart (checkpoint, --resume point), set by run_loop

    def start(self) -> None:
        """Connect Ray, reserve and start the actors, warm them up; times go to ``startup_s``."""
        cfg = self.config
        if self.rollout is not None and cfg.faults.kill_rollout_step is not None:
            raise RlsimError(
                "faults.kill_rollout_step would kill the rollout actor this session borrows (another session's); "
                "unset it, or start the session with an engine of its own"
            )
        pool = cfg.placement.pool or sorted(os.sched_getaffinity(0))
        core = start_core(cfg, pool, cfg.ray.address, cfg.ray.num_cpus, cfg.reward.replicas, self.rollout)
        self.placements, self.actors, self._started_ray = core.placements, core.actors, core.started_ray
        faults = self.config.faults
        self.backend = RayBackend(
            self.actors,
            WeightSync(self.config.trainer.sync, self.config.trainer.simulated_sync_s),
            max_attempts=faults.score_attempts,
            plan=FaultPlan(
                tuple(faults.kill_scorer_steps),
                faults.kill_rollout_step,
                tuple(faults.kill_http_server_steps),
                tuple(faults.stall_http_server_steps),
                faults.http_stall_s,
            ),
            score_timeout_s=faults.score_timeout_s,
            timeouts=faults.phase_timeouts(),
        )
        t2 = time.perf_counter()
        if self.rollout is not None:
            self.load_trainer_weights()
        if self.config.warmup:
            self.backend.warmup(warmup_requests(self.config))
        self.startup_s = {**core.seconds, "warmup": time.perf_counter() - t2}

    def load_trainer_weights(self) -> None:
        """Load this session's trainer's current weights into the rollout actor's engine, as version 0 of a new
        pipeline: what a borrowed engine needs before this session's first step (it holds whatever the last
        session left), and what a lender calls to take its engine back."""
        assert self.actors is not None, "call start() first"
        state, _ = ray.get(self.actors.trainer.export_weights.remote())
        ray.get(self.actors.rollout.load_weights.remote(state))
        ray.get(self.actors.rollout.new_pipeline.remote())

    def step(self, step: int, schedule: str | None = None, progress: Progress | None = None) -> tuple[StepRecord, list]:
        """Run step ``step`` (numbered from 1); returns its ``results.json`` record and timeline rows."""
        assert self.backend is not None, "call start() first"
        kind = schedule_kind(schedule or self.config.schedule)
        run: Callable[[LoopSession, int, str, Progress | None], tuple[StepRecord, list]] = kind.load(kind.loop_step)
        return run(self, step, kind.name, progress)

    def _cpu_seconds(self) -> dict[str, tuple[int, float]]:
        assert self.backend is not None
        values = self.backend.cpu_seconds()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        values["driver"] = (os.getpid(), usage.ru_utime + usage.ru_stime)
        return values

    def describe(self) -> dict[str, Any]:
        """Where things ran: placements, actor hosts/pids/cores, Ray nodes, versions."""
        return {
            "placement": {role: p.__dict__ | {"cores": list(p.cores)} for role, p in self.placements.items()},
            "actors": self.actors.info if self.actors else [],
            "ray_nodes": len([n for n in ray.nodes() if n.get("Alive")]) if ray.is_initialized() else 0,
            "environment": environment(),
            "faults": dict(self.backend.faults) if self.backend else {},
        }

    def close(self) -> None:
        if self.actors is not None:
            self.actors.close()
            self.actors = None
        if self._started_ray and ray.is_initialized():
            ray.shutdown()
            self._started_ray = False


@dataclass
class CoreStart:
    """What ``start_core`` started: where each role runs, its actors, whether Ray was started here (the session
    stops it then), and seconds spent on ``models_and_ray`` and ``actors``."""

    placements: dict[str, ResolvedPlacement]
    actors: ActorSet
    started_ray: bool
    seconds: dict[str, float]


def start_core(
    config: RunConfig,
    pool: Sequence[int],
    address: str | None,
    num_cpus: int | None,
    replicas: int,
    rollout: Any = None,
) -> CoreStart:
    """The start-up every session shares (``rlsim run``'s ``LoopSession``, the planner's loop runs through it,
    the contention experiment's ``ExperimentSession``): the policy and reward model built (a missing one fails
    here, in the driver, before any actor), Ray connected (``address``; ``num_cpus`` for a Ray started here), the
    run's roles placed on ``pool`` and their actors started, with ``replicas`` scorers (0: the caller starts its
    own) and ``rollout`` (a running rollout actor, checked against the config) in place of a new one."""
    t0 = time.perf_counter()
    resolve_policy(config.policy.model)
    resolve_reward_model(config.reward.model)
    started_ray = connect_ray(address, num_cpus)
    t1 = time.perf_counter()
    placements = resolve_placement(config.placement, list(pool), run_roles(config))
    makers = factories(config, placements)
    if rollout is not None:
        check_borrowed_rollout(ray.get(rollout.made_by.remote(), timeout=config.ray.start_timeout_s), makers["rollout"])
    actors = create_actors(
        placements,
        makers,
        replicas,
        config.placement.strategy,
        config.placement.ready_timeout_s,
        config.ray.start_timeout_s,
        scorer_restarts=config.faults.scorer_restarts,
        colocate=config.placement.colocate,
        rollout=rollout,
    )
    return CoreStart(placements, actors, started_ray, {"models_and_ray": t1 - t0, "actors": time.perf_counter() - t1})


def check_borrowed_rollout(held: tuple[Any, ...] | None, wanted: Any) -> None:
    """Refuse a borrowed rollout actor whose generator differs from the one ``wanted`` (the config's factory,
    ``rlsim.loop.roles.build.factories``) would build: backend, policy and every ``GeneratorSettings`` field
    but ``behaviour_logprobs``, which the borrowed one may have on when this run does not need it (the
    log-probs then come along unused)."""
    if held is None:
        raise RlsimError("the borrowed rollout actor was not built from a run config; borrow a LoopSession's")
    backend, policy, settings = held
    want_backend, want_policy, want = wanted.args
    differ = [f"backend {backend} (this run: {want_backend})"] if backend != want_backend else []
    differ += [f"policy {policy} (this run: {want_policy})"] if policy != want_policy else []
    differ += [
        f"{f.name} {getattr(settings, f.name)!r} (this run: {getattr(want, f.name)!r})"
        for f in fields(want)
        if f.name != "behaviour_logprobs" and getattr(settings, f.name) != getattr(want, f.name)
    ]
    if want.behaviour_logprobs and not settings.behaviour_logprobs:
        differ.append("behaviour_logprobs off (this run's schedule needs them)")
    if differ:
        raise RlsimError(
            f"the borrowed rollout actor's generator is not this run's: {'; '.join(differ)}; borrow one started "
            "for the same policy settings and placement, or start this session without one"
        )


def cpu_deltas(before: dict[str, tuple[int, float]], after: dict[str, tuple[int, float]]) -> dict[str, float]:
    """CPU seconds per actor over a step from (pid, cumulative seconds) readings.

    An actor Ray restarted during the step has a new pid: its reading counts from the new process's
    start, and the dead process's last seconds are lost (so the figure is a lower bound for that step).
    """
    out = {}
    for name, (pid, seconds) in after.items():
        old_pid, old_seconds = before.get(name, (pid, 0.0))
        out[name] = seconds - old_seconds if pid == old_pid else seconds
    return out


def warmup_requests(config: RunConfig) -> list[RolloutRequest]:
    """Two 4-token samples of one prompt drawn from the run's own workload: every actor's first-call set-up
    sees a prompt of the real kind and length (prefill, reward tokenizer), yet it is cheap to run.

    The prompt is step 0's, which no measured step draws (steps count from 1), so step 1 meets no prompt
    the engine has already cached."""
    prompt = make_step_requests(config.workload.spec, 0, 1, 1)[0].prompt
    return [RolloutRequest(uid, 0, prompt, 4) for uid in range(2)]


def environment() -> dict[str, Any]:
    """The driver's cores plus the machine fingerprint every rlsim result records (rlsim.fingerprint)."""
    return {"cpus": os.cpu_count(), "driver_cores": sorted(os.sched_getaffinity(0)), **machine_fingerprint()}


def sync_step(session: LoopSession, step: int, schedule: str, progress: Progress | None) -> tuple[StepRecord, list]:
    """``LoopSession.step`` for a step-by-step schedule (sequential, overlapped): one batch generated, scored,
    trained on and synced, with PPO's experience phase when the session runs the reference or the critic."""
    assert session.backend is not None, "call start() first"
    cfg = session.config
    requests = make_step_requests(cfg.workload.spec, step, cfg.workload.prompts_per_step, cfg.workload.group_size)
    before = session._cpu_seconds()
    session.backend.begin_step(step)
    if session.experience_roles:  # the reference or the critic runs (PPO, KL)
        outcome = run_ppo_step(session.backend, cast(Schedule, schedule), requests, cfg.micro_batch, progress)
    else:
        outcome = run_step(session.backend, cast(Schedule, schedule), requests, cfg.micro_batch, progress)
    cpu = cpu_deltas(before, session._cpu_seconds())
    tokens = {
        "prompt": sum(len(r.prompt_ids) for r in outcome.rollouts),
        "generated": sum(len(r.response_ids) for r in outcome.rollouts),
    }
    record = step_record(step, schedule, outcome, cpu, tokens)
    record.scoring_replicas = session.backend.router.take_summary()
    return record, timeline_rows(step, outcome.events, outcome.start)
