"""What flows through a step: requests to the policy, the rollouts it returns, and timed events.

These are plain dataclasses so they pickle cheaply between Ray actors and stay testable without Ray.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class RolloutRequest:
    """One sample to generate. ``uid`` is unique within a step; ``group`` is the prompt index.

    ``response_tokens`` is enforced exactly (``min_tokens == max_tokens``), so a length mix drawn from
    a workload holds even with random policy weights.
    """

    uid: int
    group: int
    prompt: str
    response_tokens: int


@dataclass
class Rollout:
    """A generated sample: token ids of prompt and response (policy tokenizer). ``behaviour_logprobs``:
    each response token's log-prob under the weights that sampled it, when the generator was asked for them.
    ``version_spans``: ``(policy version, index of its first response token)`` for each version that sampled part
    of the response, oldest first, when the generation took new weights mid-sequence (``async.partial_rollouts``);
    None when the rollout worker does not track versions."""

    uid: int
    group: int
    prompt_ids: list[int]
    response_ids: list[int]
    behaviour_logprobs: list[float] | None = None
    version_spans: list[tuple[int, int]] | None = None

    @property
    def first_version(self) -> int | None:
        """The oldest policy version that sampled this rollout (None when not tracked)."""
        return self.version_spans[0][0] if self.version_spans else None

    @property
    def version_span(self) -> int | None:
        """Policy versions between its first token's and its last token's (verl's ``param_version_end -
        param_version_start``; 0: one version sampled it all; None when not tracked)."""
        return self.version_spans[-1][0] - self.version_spans[0][0] if self.version_spans else None

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)


@dataclass
class Event:
    """One span of work by one actor. Times are wall-clock seconds (``time.time()``), cores a list of ids.

    ``phase`` is one of ``generate``, ``score``, ``update``, ``sync``; ``batch`` numbers the
    micro-batch within the phase (0 when the phase runs as one piece).
    """

    actor: str
    phase: str
    batch: int
    start: float
    end: float
    cores: list[int] = field(default_factory=list)
    gpu: float = 0.0
    items: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)  # score: calls that timed out, failed, stood in for

    @property
    def duration(self) -> float:
        return self.end - self.start

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
