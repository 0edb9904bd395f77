"""One Ray session of the experiment: one generator and one trainer shared by every runtime, plus
scoring actors for each runtime. The only module of the experiment that talks to Ray.

Why share: the generator (vLLM, ~35 s to start on 2 cores) and the trainer (with PPO also the
reference and the critic) do the same work for every runtime, so one of each per session keeps a
repeat's start-up to one engine start instead of one per runtime; only the scorers differ. Every
scorer is pinned to the same shared pool as in ``rlsim run``; the idle ones of other runtimes sleep
(their CPU time is recorded as orchestration, so a scorer that spins while idle would show). Actors
are built with the loop's own factories and actor classes, so each runtime's scorer is exactly what
``rlsim run`` would run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import ray

from rlsim.actors.ray_actors import ActorSet, ScoringActor, kill_quietly
from rlsim.errors import RlsimError
from rlsim.experiment.conditions import TogetherRun, Workload
from rlsim.experiment.config import ContentionConfig
from rlsim.loop.backends.ray import RayBackend
from rlsim.loop.config.algorithm import run_roles
from rlsim.loop.driver import start_core
from rlsim.loop.roles.build import factories
from rlsim.loop.sync import WeightSync
from rlsim.placement import EXPERIENCE_ROLES
from rlsim.rollout.prompts import make_step_requests
from rlsim.schedule_kinds import schedule_kind


class ExperimentSession:
    """``start()``, then ``backend(runtime)`` and ``roots(runtime)`` for each of ``runtimes`` (those
    whose scorers started and warmed up; ``failed`` says why any other was dropped), then ``close()``."""

    def __init__(self, config: ContentionConfig, runtimes: list[str]) -> None:
        self.config = config
        self.runtimes = list(runtimes)
        self.loop = config.for_runtime(self.runtimes[0])
        self.pool: list[int] = sorted(self.loop.placement.pool or os.sched_getaffinity(0))
        self.startup_s: dict[str, float] = {}
        self._core: ActorSet | None = None
        self._scorers: dict[str, list[Any]] = {}
        self._pids: dict[str, int] = {}
        self._scorer_pids: dict[str, list[int]] = {}
        self.failed: dict[str, str] = {}  # runtime -> why it was dropped from this session
        self._sync = WeightSync(self.loop.trainer.sync, self.loop.trainer.simulated_sync_s)
        self._started_ray = False
        # PPO (or a KL): the reference and the critic are started once, shared like the trainer.
        self.experience_roles = [r for r in run_roles(self.loop) if r in EXPERIENCE_ROLES]

    def start(self, note: Callable[[str], None] = lambda _: None) -> None:
        """Start Ray, the generator and trainer, then every runtime's scorers; warm all of them up."""
        engine = {"vllm": "vLLM", "hf": "Hugging Face generate"}.get(self.loop.policy.backend, "vLLM if installed")
        note(f"starting the generator ({engine}), the trainer{''.join(', the ' + r for r in self.experience_roles)}")
        # The loop's own start-up, less its scorers (replicas 0: one set per runtime is started below, with the
        # same placement), on a fresh local Ray of its own ("local" in connect_ray: never someone else's
        # cluster; the config check keeps loop.ray.address unset) with the pool's CPU count, as the pool may be
        # a subset.
        core = start_core(self.loop, self.pool, None, self.loop.ray.num_cpus or len(self.pool), replicas=0)
        self._core, self._started_ray = core.actors, core.started_ray
        self._pids = {info["name"]: int(info["pid"]) for info in self._core.info}
        note(f"starting scorers: {', '.join(self.runtimes)}")
        t2 = time.perf_counter()
        self._start_scorers(core.placements["scorer"])
        t3 = time.perf_counter()
        note("warming up every actor")
        self._warmup()
        self.startup_s = {
            "ray": core.seconds["models_and_ray"],
            "generator_trainer": core.seconds["actors"],
            "scorers": t3 - t2,
            "warmup": time.perf_counter() - t3,
        }

    def _start_scorers(self, placement: Any) -> None:
        """Every runtime's scorers, started together; a runtime whose scorer fails is dropped (``failed``)."""
        self._check_gpus(placement.gpu)
        env = {"OMP_NUM_THREADS": str(placement.threads), "MKL_NUM_THREADS": str(placement.threads)}
        for runtime in self.runtimes:
            cfg = self.config.for_runtime(runtime)
            maker = factories(cfg, {"rollout": placement, "scorer": placement, "trainer": placement})["scorer"]
            # num_cpus=0: Ray's CPU count is bookkeeping; the pool is shared by pinning, as in the loop.
            # num_gpus: without it Ray hides the GPU from the actor (CUDA_VISIBLE_DEVICES="").
            options = ScoringActor.options(num_cpus=0, num_gpus=placement.gpu, runtime_env={"env_vars": env})
            self._scorers[runtime] = [
                options.remote(f"scorer-{runtime}-{i}", placement, maker) for i in range(cfg.reward.replicas)
            ]
        refs = {rt: [a.ready.remote() for a in actors] for rt, actors in self._scorers.items()}
        deadline = time.perf_counter() + self.loop.ray.start_timeout_s
        for runtime, ready in refs.items():
            infos = self._get_or_drop(runtime, ready, max(1.0, deadline - time.perf_counter()), "start")
            if infos is not None:
                self._pids.update({info["name"]: int(info["pid"]) for info in infos})
                self._scorer_pids[runtime] = [int(info["pid"]) for info in infos]

    def _check_gpus(self, scorer_share: float) -> None:
        """Every runtime's scorers hold their GPU share at once (they take turns, but Ray reserves all)."""
        p = self.loop.placement
        need = p.rollout.gpu + p.trainer.gpu + scorer_share * self.loop.reward.replicas * len(self.runtimes)
        have = ray.cluster_resources().get("GPU", 0.0)
        if scorer_share > 0 and need > have + 1e-9:
            raise RlsimError(
                f"the experiment asks Ray for {need:g} GPUs (rollout + trainer + {len(self.runtimes)} runtimes' "
                f"scorers x {scorer_share:g}) but there are {have:g}; lower loop.placement.scorer.gpu (it is "
                "bookkeeping: the scorers share the GPU and run one at a time)"
            )

    def _get_or_drop(self, runtime: str, refs: list[Any], timeout: float, what: str) -> Any:
        """``ray.get(refs)``; on failure record why in ``failed``, drop the runtime and return None."""
        try:
            return ray.get(refs, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            reason = f"its scorer did not {what} within {timeout:.0f} s (raise loop.ray.start_timeout_s)"
        except ray.exceptions.RayError as err:
            lines = [ln for ln in str(err).strip().splitlines() if ln.strip()]
            reason = f"its scorer failed to {what}: {lines[-1] if lines else type(err).__name__}"
        if runtime == self.config.contention.baseline:
            raise RlsimError(
                f"the baseline runtime {runtime!r} cannot run: {reason}; fix it or choose another contention.baseline"
            ) from None
        self.failed[runtime] = reason
        kill_quietly(self._scorers.pop(runtime, []))
        self._scorer_pids.pop(runtime, None)
        self.runtimes.remove(runtime)
        return None

    def _warmup(self) -> None:
        """A full step's generation, then every scorer scores it in micro-batches (shortest first, so
        ``compile`` builds every length bucket now rather than inside a measured step), then the trainer."""
        assert self._core is not None
        w = self.loop.workload
        backend = self.backend(self.config.contention.baseline)
        rollouts, _ = backend.result(
            backend.submit_generate(make_step_requests(w.spec, 0, w.prompts_per_step, w.group_size))
        )
        rollouts = sorted(rollouts, key=lambda r: r.num_tokens)
        # Both micro-batch sizes the conditions send: compile marks the batch dimension dynamic after
        # a second size, and would otherwise recompile inside the first measured step that sends it.
        sizes = sorted({self.loop.micro_batch, self.config.contention.timebox.micro_batch})
        chunks = [rollouts[i : i + mb] for mb in sizes for i in range(0, len(rollouts), mb)]
        calls = {rt: [s.score.remote(c, -1) for s in actors for c in chunks] for rt, actors in self._scorers.items()}
        for runtime, refs in calls.items():
            self._get_or_drop(runtime, refs, self.loop.ray.start_timeout_s, "score the warm-up batches")
        ray.get(self._core.trainer.warmup.remote(rollouts))
        core = self._core
        ray.get([core.reference.ref_logprobs.remote(c, -1) for c in chunks] if core.reference else [])
        ray.get([core.critic.values.remote(c, -1) for c in chunks] if core.critic else [])

    def backend(self, runtime: str) -> RayBackend:
        """The loop's backend with ``runtime``'s scorers (generator, trainer, reference and critic shared)."""
        assert self._core is not None, "call start() first"
        core, scorers = self._core, self._scorers[runtime]
        names = ["rollout"] + [f"scorer-{runtime}-{i}" for i in range(len(scorers))] + ["trainer"]
        handles = [core.rollout, *scorers, core.trainer]
        for role in self.experience_roles:
            names.append(role)
            handles.append(getattr(core, role))
        actors = ActorSet(
            core.rollout,
            scorers,
            core.trainer,
            core.group,
            names,
            reference=core.reference,
            critic=core.critic,
            handles=handles,
        )
        return RayBackend(actors, self._sync)

    def together(self, backend: RayBackend, work: Workload) -> TogetherRun:
        """The together condition's run on a runtime's ``backend`` (from ``backend()``), as the loop schedule's
        ``SCHEDULES`` entry names it: an overlapped step (GRPO's or PPO's), or under ``schedule: async`` a whole
        async pipeline of ``contention.async_updates`` updates."""
        kind = schedule_kind(self.loop.schedule)
        make: Callable[..., TogetherRun] = kind.load(kind.together)
        return make(self.config, backend, work, bool(self.experience_roles))

    def roots(self, runtime: str) -> dict[str, list[int]]:
        """Accounting groups -> actor pids while ``runtime`` is measured."""
        idle = [pid for rt, pids in self._scorer_pids.items() if rt != runtime for pid in pids]
        roots = {
            "generate": [self._pids["rollout"]],
            "score": list(self._scorer_pids[runtime]),
            "update": [self._pids["trainer"]],
            "idle_scorers": idle,
        }
        return roots | {role: [self._pids[role]] for role in self.experience_roles}

    def describe(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "pids": dict(self._pids),
            "runtimes": list(self.runtimes),
            "failed": dict(self.failed),
            "startup_s": {k: round(v, 3) for k, v in self.startup_s.items()},
            "weight_sync": self._sync.fallback_reason or self.loop.trainer.sync,
        }

    def close(self) -> None:
        """Close every scorer, then the generator and trainer, then Ray if this session started it.

        Every stop is tried even when one fails (a lost cluster makes ``ray.kill`` raise), so Ray is
        never left running behind a failed kill.
        """
        actors = [a for group in self._scorers.values() for a in group]
        self._scorers = {}
        core, self._core = self._core, None
        try:
            try:
                ray.get([a.close.remote() for a in actors], timeout=30)
            except Exception:  # noqa: BLE001  (a dead actor has nothing left to close)
                pass
            kill_quietly(actors)
            if core is not None:
                core.close()
        finally:
            if self._started_ray and ray.is_initialized():
                self._started_ray = False
                ray.shutdown()
