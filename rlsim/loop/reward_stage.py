"""The scoring role of the loop: rollouts (policy token ids) in, one reward per rollout out.

The policy and the reward model have their own tokenizers, as in most RLHF set-ups, so scoring
decodes prompt + response to text with the policy tokenizer and the runtime re-tokenizes it with the
reward tokenizer. Both costs are scoring time. Batching is the configured offline batcher's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rlsim.rollout.types import Rollout


@dataclass(frozen=True)
class RewardStageSettings:
    """``runtime``: scorer registry name; ``batcher``/``batch_size``/``token_budget``: see ``rlsim.batching``."""

    runtime: str = "eager"
    model: str = "minilm-rm"
    batcher: str = "sorted"
    batch_size: int | None = 16
    token_budget: int | None = None
    max_length: int | None = 256
    device: str = "cpu"
    threads: int | None = None
    spinning: bool = True
    ort_path: str | None = None


class RewardStage:
    """A scorer (runtime) + batcher + the policy tokenizer for decoding."""

    def __init__(self, policy_dir: Path, settings: RewardStageSettings, scorer: Any | None = None) -> None:
        from transformers import AutoTokenizer

        from rlsim.batching import make_batcher
        from rlsim.models import resolve_reward_model
        from rlsim.scoring import ScorerSettings, make_scorer

        self.settings = settings
        self._policy_tokenizer = AutoTokenizer.from_pretrained(str(policy_dir))
        self._batcher = make_batcher(settings.batcher, size=settings.batch_size, budget=settings.token_budget)
        if scorer is None:
            scorer_settings = ScorerSettings(
                device=settings.device,  # type: ignore[arg-type]
                threads=settings.threads,
                max_length=settings.max_length,
                spinning=settings.spinning,
                ort_path=settings.ort_path,
            )
            scorer = make_scorer(settings.runtime, resolve_reward_model(settings.model), scorer_settings)
        self.scorer = scorer

    def texts(self, rollouts: Sequence[Rollout]) -> list[str]:
        """Prompt + response of each rollout as text (policy tokenizer, special tokens dropped)."""
        return self._policy_tokenizer.batch_decode(
            [r.prompt_ids + r.response_ids for r in rollouts], skip_special_tokens=True
        )

    def score(self, rollouts: Sequence[Rollout]) -> dict[int, float]:
        """Reward per rollout uid; each rollout is scored exactly once."""
        from rlsim.batching import score_texts

        if not rollouts:
            return {}
        rewards, _ = score_texts(self.scorer, self.texts(rollouts), self._batcher)
        return {r.uid: float(x) for r, x in zip(rollouts, rewards)}

    def close(self) -> None:
        self.scorer.close()
