"""One Ray session of the experiment: one generator and one trainer shared by every runtime, plus
scoring actors for each runtime. The only module of the experiment that talks to Ray.

Why share: the generator (vLLM, ~35 s to start on 2 cores) and the trainer do the same work for
every runtime, so one of each per session keeps a repeat's start-up to one engine start instead of
one per runtime; only the scorers differ. Every scorer is pinned to the same shared pool as in
``rlsim run``; the idle ones of other runtimes sleep (their CPU time is recorded as orchestration,
so a scorer that spins while idle would show). Actors are built with the loop's own factories and
actor classes, so each runtime's scorer is exactly what ``rlsim run`` would run.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import ray

from rlsim.actors.placement import resolve_placement
from rlsim.actors.ray_actors import ActorSet, ScoringActor, create_actors
from rlsim.actors.ray_backend import RayStepBackend
from rlsim.errors import RlsimError
from rlsim.experiment.config import ContentionConfig
from rlsim.loop.build import factories
from rlsim.loop.driver import connect_ray
from rlsim.loop.sync import WeightSync
from rlsim.rollout.prompts import make_step_requests


class ExperimentSession:
    """``start()``, then ``backend(runtime)`` and ``roots(runtime)`` per runtime, then ``close()``."""

    def __init__(self, config: ContentionConfig, runtimes: list[str]) -> None:
        self.config = config
        self.runtimes = list(runtimes)
        self.loop = config.for_runtime(self.runtimes[0])
        self.pool: list[int] = sorted(self.loop.placement.pool or os.sched_getaffinity(0))
        self.startup_s: dict[str, float] = {}
        self._core: ActorSet | None = None
        self._scorers: dict[str, list[Any]] = {}
        self._pids: dict[str, int] = {}
        self._sync = WeightSync(self.loop.trainer.sync, self.loop.trainer.simulated_sync_s)
        self._started_ray = False

    def start(self, note: Callable[[str], None] = lambda _: None) -> None:
        """Start Ray, the generator and trainer, then every runtime's scorers; warm all of them up."""
        from rlsim.models import resolve_policy, resolve_reward_model

        t0 = time.perf_counter()
        resolve_policy(self.loop.policy.model)
        resolve_reward_model(self.loop.reward.model)
        self._started_ray = connect_ray(self.loop)
        placements = resolve_placement(self.loop.placement, self.pool)
        note("starting the generator (vLLM) and the trainer")
        t1 = time.perf_counter()
        p = self.loop.placement
        # replicas=0: the scorers are started below, one set per runtime, with the same placement.
        self._core = create_actors(placements, factories(self.loop, placements), 0, p.strategy,
                                   p.ready_timeout_s, self.loop.ray.start_timeout_s)
        self._pids = {info["name"]: int(info["pid"]) for info in self._core.info}
        note(f"starting scorers: {', '.join(self.runtimes)}")
        t2 = time.perf_counter()
        self._start_scorers(placements["scorer"])
        t3 = time.perf_counter()
        note("warming up every actor")
        self._warmup()
        self.startup_s = {"ray": t1 - t0, "generator_trainer": t2 - t1, "scorers": t3 - t2,
                          "warmup": time.perf_counter() - t3}

    def _start_scorers(self, placement: Any) -> None:
        handles, names = [], []
        for runtime in self.runtimes:
            cfg = self.config.for_runtime(runtime)
            maker = factories(cfg, {"rollout": placement, "scorer": placement, "trainer": placement})["scorer"]
            env = {"OMP_NUM_THREADS": str(placement.threads), "MKL_NUM_THREADS": str(placement.threads)}
            self._scorers[runtime] = []
            for i in range(cfg.reward.replicas):
                name = f"scorer-{runtime}-{i}"
                # num_cpus=0: Ray's CPU count is bookkeeping; the pool is shared by pinning, as in the loop.
                actor = ScoringActor.options(num_cpus=0, runtime_env={"env_vars": env}).remote(name, placement, maker)
                self._scorers[runtime].append(actor)
                handles.append(actor)
                names.append(name)
        timeout = self.loop.ray.start_timeout_s
        try:
            infos = ray.get([a.ready.remote() for a in handles], timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise RlsimError(f"the scorers did not start within {timeout:g} s; raise loop.ray.start_timeout_s "
                             "on a busy machine or list fewer contention.runtimes") from None
        except ray.exceptions.RayActorError as err:
            raise RlsimError(f"a scorer failed to start: {err}") from None
        self._pids.update({info["name"]: int(info["pid"]) for info in infos})

    def _warmup(self) -> None:
        """A full step's generation, then every scorer scores it in micro-batches (shortest first, so
        ``compile`` builds every length bucket now rather than inside a measured step), then the trainer."""
        assert self._core is not None
        w = self.loop.workload
        backend = self.backend(self.runtimes[0])
        rollouts, _ = backend.generate(make_step_requests(w.spec, 0, w.prompts_per_step, w.group_size))
        rollouts = sorted(rollouts, key=lambda r: r.num_tokens)
        mb = min(self.loop.micro_batch, self.config.contention.timebox.micro_batch)
        chunks = [rollouts[i : i + mb] for i in range(0, len(rollouts), mb)]
        ray.get([s.score.remote(c, -1) for group in self._scorers.values() for s in group for c in chunks])
        ray.get(self._core.trainer.warmup.remote(rollouts))

    def backend(self, runtime: str) -> RayStepBackend:
        """The loop's step backend with ``runtime``'s scorers (generator and trainer shared)."""
        assert self._core is not None, "call start() first"
        scorers = self._scorers[runtime]
        names = ["rollout"] + [f"scorer-{runtime}-{i}" for i in range(len(scorers))] + ["trainer"]
        actors = ActorSet(self._core.rollout, scorers, self._core.trainer, self._core.group, names)
        return RayStepBackend(actors, self._sync)

    def roots(self, runtime: str) -> dict[str, list[int]]:
        """Accounting groups -> actor pids while ``runtime`` is measured."""
        idle = [pid for name, pid in self._pids.items() if name.startswith("scorer-") and
                not name.startswith(f"scorer-{runtime}-")]
        scoring = [pid for name, pid in self._pids.items() if name.startswith(f"scorer-{runtime}-")]
        return {"generate": [self._pids["rollout"]], "score": scoring, "update": [self._pids["trainer"]],
                "idle_scorers": idle}

    def describe(self) -> dict[str, Any]:
        return {"pool": self.pool, "pids": dict(self._pids), "startup_s": {k: round(v, 3) for k, v in self.startup_s.items()},
                "weight_sync": self._sync.fallback_reason or self.loop.trainer.sync}

    def close(self) -> None:
        """Close every scorer, then the generator and trainer, then Ray if this session started it."""
        actors = [a for group in self._scorers.values() for a in group]
        try:
            ray.get([a.close.remote() for a in actors], timeout=30)
        except Exception:  # noqa: BLE001  (a dead actor has nothing left to close)
            pass
        for actor in actors:
            ray.kill(actor)
        self._scorers = {}
        if self._core is not None:
            self._core.close()
            self._core = None
        if self._started_ray and ray.is_initialized():
            ray.shutdown()
            self._started_ray = False
