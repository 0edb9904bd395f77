"""The scoring role of the loop: rollouts (policy token ids) in, one reward per rollout out.

The policy and the reward model have their own tokenizers, as in most RLHF set-ups, so scoring
decodes prompt + response to text with the policy tokenizer and the runtime re-tokenizes it with the
reward tokenizer. Both costs are scoring time. Batching is the configured offline batcher's job.

With the ``http`` runtime the stage supervises the server its scorer started: if that server has
died, the stage closes the scorer, makes a new one (which starts a new server) and scores the call
again, once; scoring is idempotent, so every rollout is still scored exactly once. A server that is
alive but does not answer is not restarted: the client gives up at ``http_deadline_s`` (or after
``reward.http.retries``) and the request gets ``reward.http.on_timeout``: the step fails (the default), the
rollouts get ``default_reward``, or their groups are dropped (``rlsim.loop.schedules.dropped``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlsim.batching import make_batcher, score_texts
from rlsim.errors import RlsimError
from rlsim.models import resolve_reward_model
from rlsim.registry import import_modules
from rlsim.rollout.types import Rollout
from rlsim.scoring import ScorerSettings, make_scorer
from rlsim.scoring.base import CountingScorer, PairScorer, ServerScorer

if TYPE_CHECKING:
    from rlsim.scoring.base import Scorer

# Runs in the scoring actor: its records land in that Ray worker's log, as its stderr did before.
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RewardStageSettings:
    """``runtime``: scorer registry name; ``batcher``/``batch_size``/``token_budget``: see ``rlsim.batching``.
    ``server_runtime``: for ``http``, the runtime its server wraps; ``http_deadline_s``: for ``http``, the
    longest one batch may take including the client's retries (seconds). ``imports``: modules that register
    plug-in runtimes, imported before the scorer is built (this may be a fresh Ray worker process).
    ``options``: the settings of a reward that is no model (``function``, ``sandbox``).
    ``int8_calibration`` / ``int8_smooth_alpha``: how a calibrated int8 runtime builds its graph (ScorerSettings)."""

    runtime: str = "eager"
    model: str = "minilm-rm"
    batcher: str = "sorted"
    batch_size: int | None = 16
    token_budget: int | None = None
    max_length: int | None = 256
    device: str = "cpu"
    threads: int | None = None
    spinning: bool = True
    engine_inline: bool = False
    ort_path: str | None = None
    server_runtime: str = "ort"
    http_deadline_s: float = 60.0
    imports: tuple[str, ...] = ()
    http_protocol: str = "rlsim"
    int8_calibration: str = "minmax"
    int8_smooth_alpha: float | None = None
    url: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


class RewardStage:
    """A scorer (runtime) + batcher + the policy tokenizer for decoding."""

    def __init__(self, policy_dir: Path, settings: RewardStageSettings, scorer: Scorer | None = None) -> None:
        from transformers import AutoTokenizer

        import_modules(settings.imports, "reward.imports")
        self.settings = settings
        self._policy_tokenizer = AutoTokenizer.from_pretrained(str(policy_dir))
        self._batcher = make_batcher(settings.batcher, size=settings.batch_size, budget=settings.token_budget)
        self._make_scorer: Callable[[], Scorer] | None = None  # None: a scorer was handed in, cannot remake it
        if scorer is None:
            scorer_settings = ScorerSettings(
                device=settings.device,  # type: ignore[arg-type]
                threads=settings.threads,
                max_length=settings.max_length,
                spinning=settings.spinning,
                engine_inline=settings.engine_inline,
                ort_path=settings.ort_path,
                server_runtime=settings.server_runtime,
                http_deadline_s=settings.http_deadline_s,
                http_protocol=settings.http_protocol,  # type: ignore[arg-type]
                int8_calibration=settings.int8_calibration,  # type: ignore[arg-type]
                int8_smooth_alpha=settings.int8_smooth_alpha,
                url=settings.url,
                options=dict(settings.options),
            )
            self._make_scorer = partial(
                make_scorer, settings.runtime, resolve_reward_model(settings.model), scorer_settings
            )
            scorer = self._make_scorer()
        self.scorer: Scorer = scorer
        self.server_restarts = 0
        self.last_outcomes: dict[str, int] = {}  # what the last ``score`` call counted (a CountingScorer's)

    def texts(self, rollouts: Sequence[Rollout]) -> list[str]:
        """Prompt + response of each rollout as text (policy tokenizer, special tokens dropped)."""
        return self._policy_tokenizer.batch_decode(
            [r.prompt_ids + r.response_ids for r in rollouts], skip_special_tokens=True
        )

    def score(self, rollouts: Sequence[Rollout]) -> dict[int, float]:
        """Reward per rollout uid; each rollout is scored exactly once (see the module doc for http)."""
        self.last_outcomes = {}
        if not rollouts:
            return {}
        if isinstance(self.scorer, PairScorer):
            return self._score_pairs(rollouts)
        texts = self.texts(rollouts)
        t0 = time.monotonic()
        try:
            rewards, _ = score_texts(self.scorer, texts, self._batcher)
        except RlsimError as err:
            if not self._server_died():
                raise self._in_loop_terms(err, time.monotonic() - t0) from None
            self._restart_scorer(err)
            rewards, _ = score_texts(self.scorer, texts, self._batcher)
        if isinstance(self.scorer, CountingScorer):  # a remote server's unanswered requests and retries
            self.last_outcomes = self.scorer.take_outcomes()
        return {r.uid: float(x) for r, x in zip(rollouts, rewards, strict=True)}

    def _score_pairs(self, rollouts: Sequence[Rollout]) -> dict[int, float]:
        """A verifier or sandbox: prompts and responses decoded apart, batched by response length."""
        assert isinstance(self.scorer, PairScorer)
        decode = partial(self._policy_tokenizer.batch_decode, skip_special_tokens=True)
        prompts, responses = decode([r.prompt_ids for r in rollouts]), decode([r.response_ids for r in rollouts])
        rewards: dict[int, float] = {}
        for batch in self._batcher.plan(self.scorer.token_lengths(responses)):
            out = self.scorer.score_pairs([prompts[i] for i in batch], [responses[i] for i in batch])
            rewards.update({rollouts[i].uid: float(x) for i, x in zip(batch, out, strict=True)})
        if isinstance(self.scorer, CountingScorer):
            self.last_outcomes = self.scorer.take_outcomes()
        return rewards

    def _server_died(self) -> bool:
        return self._make_scorer is not None and isinstance(self.scorer, ServerScorer) and self.scorer.server_exited()

    def _restart_scorer(self, err: RlsimError) -> None:
        first_line = str(err).splitlines()[0]
        log.warning(f"{first_line}; starting a new scoring server and scoring the batch again")
        self.scorer.close()
        assert self._make_scorer is not None
        self.scorer = self._make_scorer()
        self.server_restarts += 1

    def _in_loop_terms(self, err: RlsimError, elapsed_s: float) -> RlsimError:
        """``err`` with the run-config setting to raise when the http client ran out of time."""
        if self.settings.runtime != "http" or elapsed_s < self.settings.http_deadline_s:
            return err
        return RlsimError(
            f"{err}\n(in a run config that deadline is reward.http_deadline_s, now {self.settings.http_deadline_s:g} s)"
        )

    def close(self) -> None:
        self.scorer.close()
