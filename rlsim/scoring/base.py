"""The scoring role: texts in, one float32 reward per text out.

A ``Scorer`` runs *one forward pass per call* of ``score_batch``: how texts are grouped into
batches is the batcher's job (``rlsim.batching``), so runtimes and batching strategies can be
combined freely and measured apart. Tokenisation (reward tokenizer, truncation, padding) is part
of scoring time, as it is in a real RLHF pipeline where policy and reward model differ.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, Sequence, runtime_checkable

import numpy as np

from rlsim.errors import RlsimError
from rlsim.registry import Registry

if TYPE_CHECKING:
    from rlsim.models.reward import RewardModelSpec


@dataclass(frozen=True)
class ScorerSettings:
    """Runtime knobs shared by every backend; a backend ignores what does not apply to it.

    ``threads``: torch threads / ORT intra-op threads (None: the cores this process may run on).
    ``spinning``: let ORT worker threads spin between ops (lower latency, burns idle cores).
    ``max_length``: truncation limit in tokens (None: the model's own limit).
    ``truncation``: ``left`` keeps the end of a text (the response, which the reward is about).
    ``compile_buckets``: sequence lengths ``compile`` pads to, so it compiles once per bucket.
    ``server_runtime`` / ``url``: for ``http``: the runtime the server wraps, or an existing server.
    """

    device: Literal["cpu", "cuda"] = "cpu"
    threads: int | None = None
    inter_op_threads: int = 1
    spinning: bool = True
    max_length: int | None = None
    truncation: Literal["left", "right"] = "left"
    compile_buckets: tuple[int, ...] = (16, 32, 64, 128, 256, 512)
    server_runtime: str = "ort"
    url: str | None = None
    ort_path: str | None = None

    def resolved_threads(self) -> int:
        return self.threads if self.threads else len(os.sched_getaffinity(0))


@dataclass
class ScorerStats:
    """What a scorer did, kept apart from steady-state timing: load/compile are one-off costs."""

    load_s: float = 0.0
    compile_s: float = 0.0
    batches: int = 0
    sequences: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    truncated: int = 0

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


@runtime_checkable
class Scorer(Protocol):
    name: str
    stats: ScorerStats

    def score_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Score ``texts`` in one forward pass; returns float32 array of shape ``(len(texts),)``."""
        ...

    def close(self) -> None: ...


SCORERS: Registry[type] = Registry("scoring runtime")
register_scorer = SCORERS.register

INT8_RUNTIMES = ("ort-int8", "native-int8")
ALL_RUNTIMES = ("eager", "compile", "ort", "ort-int8", "native", "native-int8", "http")


@dataclass
class EncodedBatch:
    """Token ids for one batch, padded to a common length. Shapes ``(batch, seq)``, int64."""

    input_ids: np.ndarray
    attention_mask: np.ndarray
    real_tokens: int = 0
    truncated: int = 0

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.input_ids.shape)  # type: ignore[return-value]


class TokenizingScorer:
    """Base for backends that tokenize with the reward model's tokenizer and run a tensor model."""

    name = "base"

    def __init__(self, model: "RewardModelSpec", settings: ScorerSettings) -> None:
        self.model = model
        self.settings = settings
        self.stats = ScorerStats()
        self.max_length = min(settings.max_length or model.max_length, model.max_length)
        self._tokenizer = load_reward_tokenizer(model, settings)

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Untruncated length of each text in reward-model tokens (special tokens included)."""
        return [len(ids) for ids in self._tokenizer(list(texts), add_special_tokens=True)["input_ids"]]

    def encode(self, texts: Sequence[str]) -> EncodedBatch:
        """Tokenize, truncate to ``max_length`` (counted), pad to the longest or the backend's bucket."""
        lengths = self.token_lengths(texts)
        truncated = sum(n > self.max_length for n in lengths)
        target = self._pad_length(min(max(lengths), self.max_length))
        enc = self._tokenizer(
            list(texts),
            padding="max_length",
            max_length=target,
            truncation=True,
            return_tensors="np",
        )
        ids = enc["input_ids"].astype(np.int64, copy=False)
        mask = enc["attention_mask"].astype(np.int64, copy=False)
        return EncodedBatch(ids, mask, real_tokens=int(mask.sum()), truncated=truncated)

    def score_batch(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0,), dtype=np.float32)
        check_texts(texts)
        batch = self.encode(texts)
        rewards = self._forward(batch)
        self.stats.batches += 1
        self.stats.sequences += len(texts)
        self.stats.tokens += batch.real_tokens
        self.stats.padded_tokens += int(batch.input_ids.size)
        self.stats.truncated += batch.truncated
        return np.asarray(rewards, dtype=np.float32).reshape(len(texts))

    def _pad_length(self, longest: int) -> int:
        """Length to pad a batch whose longest text has ``longest`` tokens to (default: no extra padding)."""
        return longest

    def _forward(self, batch: EncodedBatch) -> np.ndarray:
        raise NotImplementedError

    def close(self) -> None:
        pass


def load_reward_tokenizer(model: "RewardModelSpec", settings: ScorerSettings):
    """The reward model's tokenizer, set up for rlsim's own truncation (side from ``settings``)."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(str(model.path))
    tokenizer.truncation_side = settings.truncation
    # rlsim truncates (and counts) itself; stop the tokenizer warning about long raw texts.
    tokenizer.model_max_length = 1 << 30
    if tokenizer.pad_token_id is None:
        raise RlsimError(
            f"the tokenizer in {model.path} has no pad token; set one (tokenizer.pad_token = ...) and save it again"
        )
    return tokenizer


def check_texts(texts: Sequence[str]) -> None:
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise RlsimError(f"text {i} is {type(t).__name__}, not str; pass a list of strings")
        try:
            t.encode("utf-8")
        except UnicodeEncodeError:
            # Unpaired surrogates (e.g. from a bad JSON decode) make the tokenizer raise TypeError.
            raise RlsimError(f"text {i} is not valid Unicode (unpaired surrogate); clean the input text") from None


def make_scorer(runtime: str, model: "RewardModelSpec", settings: ScorerSettings | None = None) -> Scorer:
    """Build a scorer by registry name, e.g. ``make_scorer("ort", resolve_reward_model("minilm-rm"))``."""
    import rlsim.scoring  # noqa: F401  (fills the registry)

    cls = SCORERS.get(runtime)
    t0 = time.perf_counter()
    scorer = cls(model, settings or ScorerSettings())
    scorer.stats.load_s = time.perf_counter() - t0
    return scorer


def expand_runtimes(spec: str | Sequence[str]) -> list[str]:
    """``"all"`` -> every runtime; ``"eager,ort"`` -> ["eager", "ort"]; unknown names raise."""
    import rlsim.scoring  # noqa: F401

    names = list(ALL_RUNTIMES) if spec == "all" else (spec.split(",") if isinstance(spec, str) else list(spec))
    names = [n.strip() for n in names if n.strip()]
    for n in names:
        SCORERS.get(n)
    return names
