"""An async run through ``run_loop`` on in-process workers (rlsim.loop.backends.local, threaded): every step carries
verl's fully async metric names, and ``--resume`` after a stop continues with the stopped run's policy.

The doubles keep their own truth: the trainer exports its update count as its weights and saves the
uids it trained in its checkpoint; the engine reads the version out of the weights it loads and tags
each rollout with it. So the test sees which policy made what, independent of the pipeline's books.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from rlsim.actors.workers import RolloutWorker, ScoringWorker, TrainerWorker
from rlsim.errors import RlsimError
from rlsim.loop.backends.local import InProcessBackend
from rlsim.loop.config import RunConfig
from rlsim.loop.run import run_loop
from rlsim.loop.schedules.asynchronous.session import CHECKPOINTS, AsyncRun
from rlsim.loop.sync import WeightSync
from rlsim.rollout.generator import SyncResult
from rlsim.rollout.types import Rollout, RolloutRequest
from tests.helpers.loop_doubles import FakeGenerator, FakeStage, FakeTrainer

GROUP = 2
BATCH = 2 * GROUP  # rollouts per update


def config(steps: int, **async_: object) -> RunConfig:
    return RunConfig.model_validate(
        {
            "schedule": "async",
            "steps": steps,
            "micro_batch": GROUP,
            "policy": {"backend": "vllm"},
            "workload": {"prompts_per_step": 2, "group_size": GROUP},
            "async": {"max_staleness": 1, **async_},
            "trainer": {"sync": "reload"},
        }
    )


class VersionedTrainer(FakeTrainer):
    """Its weights are its update count; each update takes 30 ms, so generation runs ahead of it."""

    def train_step(self, rollouts, rewards):  # type: ignore[no-untyped-def]
        time.sleep(0.03)
        return super().train_step(rollouts, rewards)

    def export_weights(self) -> dict[str, np.ndarray]:
        return {"version": np.array([len(self.seen)], dtype=np.int64)}


class VersionedGenerator(FakeGenerator):
    """Tags each rollout with the version read from the last weights it loaded (0 before any)."""

    def __init__(self) -> None:
        super().__init__()
        self.version = 0
        self.made: dict[int, int] = {}  # uid -> version of the weights that generated it

    def generate(self, requests: Sequence[RolloutRequest]) -> list[Rollout]:
        time.sleep(0.01)
        out = super().generate(requests)
        self.made.update((r.uid, self.version) for r in out)
        return out

    def load_weights(self, weights_dir: Path) -> SyncResult:
        from safetensors.numpy import load_file

        self.version = int(load_file(str(weights_dir / "model.safetensors"))["version"][0])
        return SyncResult("fake-reload", 0.0)


class LocalAsyncSession:
    """What ``run_loop`` uses of a ``LoopSession``, its async pipeline on in-process workers.
    ``stop_after``: the run is interrupted (Ctrl-C) when asked for the step after it."""

    def __init__(self, cfg: RunConfig, stop_after: int | None = None) -> None:
        self.config, self.startup_s, self.backend = cfg, {}, None
        self.async_run: AsyncRun | None = None
        self.async_start = None  # set by run_loop
        self.gen, self.trainer, self.stop_after = VersionedGenerator(), VersionedTrainer(), stop_after
        self._workers: InProcessBackend | None = None

    def describe(self) -> dict:
        return {"actors": []}

    def step(self, step: int, schedule=None, progress=None):  # type: ignore[no-untyped-def]
        if self.stop_after is not None and step > self.stop_after:
            raise KeyboardInterrupt
        if self.async_run is None:
            self._workers = InProcessBackend(
                RolloutWorker("rollout", None, lambda: self.gen, pin=False),
                [ScoringWorker("scorer-0", None, FakeStage, pin=False)],
                TrainerWorker("trainer", None, lambda: self.trainer, pin=False),
                WeightSync("reload", 0.0),
                threaded=True,
            )
            self.async_run = AsyncRun(self.config, self._workers, self.async_start)
        return self.async_run.step(step, progress)

    def close(self) -> None:
        if self._workers is not None:
            self._workers.close()


def run(cfg: RunConfig, out: Path, session: LocalAsyncSession, resume: bool = False) -> dict:
    try:
        run_loop(cfg, out, show_progress=False, session=session, resume=resume)  # type: ignore[arg-type]
    except KeyboardInterrupt:
        pass
    finally:
        session.close()
    return json.loads((out / "results.json").read_text())


def test_each_async_step_has_verls_fully_async_metrics(tmp_path: Path) -> None:
    saved = run(config(4), tmp_path, LocalAsyncSession(config(4)))
    stale = 0
    for k, step in enumerate(saved["steps"], start=1):
        m = step["metrics"]
        for sync_key in ("timing_s/gen", "timing_s/reward", "timing_s/update_actor", "timing_s/step"):
            assert sync_key in m  # the names every schedule writes stay
        total = step["time_s"]["total"]
        assert m["rollouter/version_time"] == total
        assert m["trainer/idle_ratio"] == pytest.approx(1 - step["busy_s"]["trainer"] / total)
        assert m["rollouter/idle_ratio"] == pytest.approx(1 - step["busy_s"]["rollout"] / total)
        assert m["rollouter/active_time"] == step["busy_s"]["rollout"]
        assert m["fully_async/total_wait_time"] == pytest.approx(total - step["busy_s"]["trainer"])
        assert m["fully_async/count/current_param_version"] == k - 1  # the trainer's version when it took the batch
        stale += sum(n for lag, n in step["staleness"].items() if lag != "0")
        assert m["fully_async/count/stale_trajectory_processed"] == stale  # cumulative, as verl counts
        assert m["fully_async/count/stale_samples_processed"] == stale // GROUP
        assert m["timing_s/param_sync"] == step["sync"]["latency_s"] >= 0
        assert not any(key.startswith("fully_async/partial/") for key in m)  # no partial rollouts: left out
    assert stale > 0  # with max_staleness 1 and a slow trainer, later batches are one version old
    last = saved["steps"][-1]["metrics"]
    assert last["fully_async/count/total_generated_samples"] == saved["rollouts_total"]["generated"] // GROUP
    assert last["fully_async/count/dropped_stale_samples"] == saved["rollouts_total"]["dropped_stale"] // GROUP


def test_resume_after_a_stop_continues_with_the_stopped_runs_policy(tmp_path: Path) -> None:
    first = LocalAsyncSession(config(5), stop_after=2)
    stopped = run(config(5), tmp_path, first)
    assert [s["policy_version"] for s in stopped["steps"]] == [1, 2] and stopped["complete"] is False
    # One checkpoint per update, kept until a later step is on disk (update 3 may have saved one before the stop).
    names = sorted(p.name for p in (tmp_path / CHECKPOINTS).iterdir())
    assert names[:2] == ["trainer-v1.pt", "trainer-v2.pt"] and set(names[2:]) <= {"trainer-v3.pt"}

    second = LocalAsyncSession(config(5))
    saved = run(config(5), tmp_path, second, resume=True)
    assert saved["complete"] is True and saved["resumed_at_step"] == 3
    assert [s["policy_version"] for s in saved["steps"]] == [1, 2, 3, 4, 5]
    # The fresh trainer restored the stopped one's two updates and made three more.
    assert [u for u, _ in second.trainer.seen[:2]] == [u for u, _ in first.trainer.seen[:2]]
    assert len(second.trainer.seen) == 5
    trained = [u for uids, _ in second.trainer.seen for u in uids]
    assert len(trained) == len(set(trained)) == 5 * BATCH  # no rollout trained twice across the two processes
    # The fresh engine loaded the restored version 2 before its first generate call, and every rollout the
    # resumed run trained is within the bound of the update that used it.
    assert min(second.gen.made.values()) == 2
    for update, (uids, _) in enumerate(second.trainer.seen[2:], start=2):
        assert all(update - second.gen.made[u] <= 1 for u in uids)
    totals = saved["rollouts_total"]
    assert totals["trained"] == 5 * BATCH
    assert totals["generated"] == totals["trained"] + totals["dropped_stale"] + totals["unfinished_at_end"]
    assert totals["generated"] == stopped["rollouts_total"]["generated"] + len(second.gen.made)
    assert sum(saved["async"]["staleness_histogram"].values()) == 5 * BATCH
    assert saved["async"]["wall_s"] > stopped["async"]["wall_s"]
    assert saved["steps"][-1]["metrics"]["fully_async/count/current_param_version"] == 4


def test_resume_is_refused_when_no_trainer_state_was_kept(tmp_path: Path) -> None:
    run(config(3, checkpoint=False), tmp_path, LocalAsyncSession(config(3, checkpoint=False), stop_after=1))
    with pytest.raises(RlsimError, match="async.checkpoint is false"):
        run_loop(config(3, checkpoint=False), tmp_path, show_progress=False, resume=True)
    run(config(3), tmp_path / "b", LocalAsyncSession(config(3), stop_after=1))
    (tmp_path / "b" / CHECKPOINTS / "trainer-v1.pt").unlink()
    with pytest.raises(RlsimError, match="is missing"):
        run_loop(config(3), tmp_path / "b", show_progress=False, resume=True)
