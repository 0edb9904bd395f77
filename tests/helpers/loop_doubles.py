"""In-process test doubles for the loop's three roles: deterministic, instant, and able to misbehave on cue.

Shared by tests/loop and tests/actors (tests/helpers). Ray
workers cannot import it, so Ray tests register it with ``cloudpickle.register_pickle_by_value``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from rlsim.loop.roles.trainer import TrainStats
from rlsim.rollout.generator import SyncResult
from rlsim.rollout.types import Rollout, RolloutRequest


def hold(hold_dir: str | None, phase: str, limit_s: float = 20.0) -> None:
    """Block while the file ``hold_dir/phase`` exists, at most ``limit_s``: a stall a test starts by
    creating the file and ends by deleting it (the file system reaches into Ray's worker processes).
    The limit keeps a missing deadline from hanging the test: the call just finishes late."""
    if hold_dir is None:
        return
    end = time.monotonic() + limit_s
    while os.path.exists(os.path.join(hold_dir, phase)) and time.monotonic() < end:
        time.sleep(0.02)


class FakeGenerator:
    """Rollout ``uid`` gets prompt ``[1, 2, 3, uid]`` and ``response_tokens`` copies of token 7.

    ``stream`` finishes requests shortest first, as a continuous-batching engine does.
    ``drop``: that many requests silently produce nothing; ``short``: responses one token short;
    ``fail_reload``: ``load_weights`` raises; ``hold_dir``: generation and reload stall while the
    files ``generate`` / ``sync`` exist there (see ``hold``).
    """

    name = "fake"

    def __init__(self, drop: int = 0, short: bool = False, fail_reload: bool = False, hold_dir: str | None = None):
        self.drop, self.short, self.fail_reload, self.hold_dir = drop, short, fail_reload, hold_dir
        self.reloads: list[Path] = []

    def _make(self, r: RolloutRequest) -> Rollout:
        n = r.response_tokens - (1 if self.short else 0)
        return Rollout(r.uid, r.group, [1, 2, 3, r.uid], [7] * n)

    def generate(self, requests: Sequence[RolloutRequest]) -> list[Rollout]:
        hold(self.hold_dir, "generate")
        return [self._make(r) for r in requests[self.drop :]]

    def stream(self, requests: Sequence[RolloutRequest], micro_batch: int) -> Iterator[list[Rollout]]:
        hold(self.hold_dir, "generate")
        done = [self._make(r) for r in sorted(requests[self.drop :], key=lambda r: (r.response_tokens, r.uid))]
        for i in range(0, len(done), micro_batch):
            yield done[i : i + micro_batch]

    def load_weights(self, weights_dir: Path) -> SyncResult:
        hold(self.hold_dir, "sync")
        if self.fail_reload:
            raise RuntimeError("this engine cannot reload weights")
        assert (weights_dir / "model.safetensors").is_file()
        self.reloads.append(weights_dir)
        return SyncResult("fake-reload", 0.0)

    def close(self) -> None:
        pass


class FakeStage:
    """Reward = response length in tokens. ``double``: also returns a reward for uid 0 (a doubled score).
    ``die_once_flag``: see ``_die_once`` (a scorer crash mid-step)."""

    scorer = None  # no runtime behind it (a RewardStage holds a Scorer here)

    def __init__(self, double: bool = False, die_once_flag: str | None = None) -> None:
        self.double, self.die_once_flag = double, die_once_flag
        self.calls = 0

    def score(self, rollouts: Sequence[Rollout]) -> dict[int, float]:
        self.calls += 1
        _die_once(self.die_once_flag)
        rewards = {r.uid: float(len(r.response_ids)) for r in rollouts}
        if self.double:
            rewards[0] = 0.0
        return rewards

    def close(self) -> None:
        pass


class DroppingStage(FakeStage):
    """A reward with ``on_timeout: drop``: the rollouts in ``drop`` get NaN and are counted as dropped in
    ``last_outcomes`` (``counted=False``: NaN with no count, a broken scorer)."""

    def __init__(self, drop: set[int], counted: bool = True) -> None:
        super().__init__()
        self.drop, self.counted = drop, counted
        self.last_outcomes: dict[str, int] = {}

    def score(self, rollouts: Sequence[Rollout]) -> dict[int, float]:
        rewards = super().score(rollouts)
        hit = [u for u in rewards if u in self.drop]
        rewards.update((u, float("nan")) for u in hit)
        self.last_outcomes = {"timeouts": len(hit), "dropped": len(hit)} if hit and self.counted else {}
        return rewards


class FakeTrainer:
    """Records what it was given; ``export_weights`` returns a two-array state. ``hold_dir``: the update
    and the warm-up stall while the files ``update`` / ``warmup`` exist there (see ``hold``)."""

    def __init__(self, hold_dir: str | None = None) -> None:
        self.seen: list[tuple[list[int], dict[int, float]]] = []
        self.hold_dir = hold_dir

    def train_step(self, rollouts: Sequence[Rollout], rewards: dict[int, float]) -> TrainStats:
        hold(self.hold_dir, "update")
        self.seen.append(([r.uid for r in rollouts], dict(rewards)))
        n = sum(len(r.response_ids) for r in rollouts)
        return TrainStats(len(rollouts), n, 0.0, 0.0, 0.0, 0.0, float(np.mean(list(rewards.values()))), 0.0, 0.0)

    def warmup(self, rollouts: Sequence[Rollout]) -> None:
        hold(self.hold_dir, "warmup")

    def export_weights(self) -> dict[str, np.ndarray]:
        return {"w": np.arange(4, dtype=np.float32), "b": np.zeros(2, dtype=np.float32)}

    def save_checkpoint(self, path: str | Path, version: int) -> None:
        """The version and the uids of every update so far (a real trainer saves weights and optimizer)."""
        import json

        from rlsim.io import atomic_write_text

        atomic_write_text(path, json.dumps({"version": version, "seen": [uids for uids, _ in self.seen]}))

    def load_checkpoint(self, path: str | Path) -> int:
        import json

        state = json.loads(Path(path).read_text())
        self.seen = [(uids, {}) for uids in state["seen"]]
        return int(state["version"])

    def close(self) -> None:
        pass


def requests(num_prompts: int = 4, group_size: int = 3, base: int = 5) -> list[RolloutRequest]:
    """uid = g * group_size + s with response length base + (uid * 7) % 11 (varied, deterministic)."""
    return [
        RolloutRequest(g * group_size + s, g, f"prompt {g}", base + ((g * group_size + s) * 7) % 11)
        for g in range(num_prompts)
        for s in range(group_size)
    ]


def broken_factory() -> None:
    """A role factory that fails the way a bad config does: an ``RlsimError`` naming the fix."""
    from rlsim.errors import RlsimError

    raise RlsimError("the reward model folder is missing; fix reward.model")


class StallingStage(FakeStage):
    """Never answers within a test's patience: a scorer whose server hangs."""

    def score(self, rollouts: Sequence[Rollout]) -> dict[int, float]:
        import time

        time.sleep(3600)
        return {}


def _die_once(flag: str | None) -> None:
    """The first call in any process to create the file at ``flag`` exits its process. The create is atomic
    (``O_EXCL``), so of two replicas called at the same moment exactly one dies."""
    if not flag:
        return
    try:
        os.close(os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    os._exit(1)


class FakeReference:
    """Log-prob of every response token = -(uid % 5 + 1) / 10, so tests can tell whose it is.
    ``die_once_flag``: see ``_die_once`` (a reference crash mid-step)."""

    def __init__(self, die_once_flag: str | None = None) -> None:
        self.die_once_flag = die_once_flag
        self.calls = 0

    def logprobs(self, rollouts: Sequence[Rollout]) -> dict[int, np.ndarray]:
        self.calls += 1
        _die_once(self.die_once_flag)
        return {r.uid: np.full(len(r.response_ids), -(r.uid % 5 + 1) / 10, dtype=np.float32) for r in rollouts}

    def close(self) -> None:
        pass


class FakeCritic:
    """Values 0.1 per token; ``update`` records its inputs and returns stats with value_loss = mean return.
    ``die_once_flag``: see ``_die_once``."""

    def __init__(self, die_once_flag: str | None = None) -> None:
        self.die_once_flag = die_once_flag
        self.updates: list[list[int]] = []

    def values(self, rollouts: Sequence[Rollout]) -> dict[int, np.ndarray]:
        _die_once(self.die_once_flag)
        return {r.uid: np.full(len(r.response_ids), 0.1, dtype=np.float32) for r in rollouts}

    def update(self, rollouts: Sequence[Rollout], returns: dict, old_values: dict):  # -> CriticStats
        from rlsim.loop.roles.critic import CriticStats

        self.updates.append(sorted(r.uid for r in rollouts))
        mean = float(np.mean(np.concatenate([returns[r.uid] for r in rollouts])))
        return CriticStats(
            value_loss=mean,
            value_clip_fraction=0.0,
            grad_norm=0.0,
            response_tokens=sum(len(r.response_ids) for r in rollouts),
            seconds=0.0,
        )

    def close(self) -> None:
        pass


class FakePpoTrainer(FakeTrainer):
    """The real experience arithmetic (``make_experience``) on behaviour log-probs of -0.2 per token,
    and an update that only counts; ``algorithm``/``kl_coef`` choose what the experience needs."""

    def __init__(self, algorithm: str = "ppo", kl_coef: float = 0.1, hold_dir: str | None = None) -> None:
        from rlsim.algorithms.experience import AlgorithmSettings

        super().__init__(hold_dir)
        self.settings = AlgorithmSettings(algorithm=algorithm, kl_coef=kl_coef, kl_target="reward")  # type: ignore[arg-type]

    def experience(self, rollouts, rewards, ref_logprobs=None, values=None):  # -> Experience
        from rlsim.algorithms.experience import make_experience

        old = {r.uid: np.full(len(r.response_ids), -0.2, dtype=np.float32) for r in rollouts}
        return make_experience(self.settings, rollouts, rewards, old, ref_logprobs, values)

    def update(self, rollouts: Sequence[Rollout], exp) -> TrainStats:
        hold(self.hold_dir, "update")
        self.seen.append(([r.uid for r in rollouts], {}))
        n = sum(len(r.response_ids) for r in rollouts)
        return TrainStats(
            len(rollouts),
            n,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            algorithm=self.settings.algorithm,
            policy_loss=0.0,
            kl=exp.kl_mean(),
            entropy=1.0,
        )
