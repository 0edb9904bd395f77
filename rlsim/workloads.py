"""Workloads: the texts that get generated and scored, synthetic (seeded) or read from a file.

A synthetic workload draws a prompt length and a response length (in tokens) per sample from a
distribution and fills them with common English words, each one token in the WordPiece/BPE
vocabularies rlsim ships (so a text of N words is about N reward-model tokens, plus special
tokens). A file workload reads real texts: JSONL with a ``text`` field, or ``.txt`` with one
text per line. Either way the sampled response lengths are exposed (``Workload.response_tokens``)
for the rollout actor, which enforces them per request (``min_tokens = max_tokens``).

Example: ``build_workload(WorkloadSpec(count=64, seed=1))`` -> 64 texts whose response lengths
follow a lognormal with mean 200 tokens, sigma 0.6, clipped to 16..512.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlsim.errors import RlsimError
from rlsim.io import read_user_text

# Lower-case words that are single tokens in BERT's uncased vocabulary (and common BPE ones).
WORDS = (
    "with that from were this they which have first also their been when after there into time would what "
    "about said over then other more like back them only some could where just during before made school "
    "through than years most world between down well three year while will later city under around such "
    "being used state people part know against your many second both national these known until even head "
    "team because since still long work south became high again family right eyes house season took life "
    "north same each called name much place however four group another found area here going away series "
    "left home music best make hand number company several never last very album take good game played "
    "little began want those side held early west face think came small general town line based thought "
    "looked along club went show member college father public come five station church next former room "
    "party system love though every look song water century without body black night within"
).split()


class _Dist(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` lengths in tokens, int64, shape ``(n,)``."""
        raise NotImplementedError


class LognormalLengths(_Dist):
    """Lognormal lengths: ``mean`` is the arithmetic mean in tokens before clipping to ``min..max``.

    The underlying normal has ``mu = ln(mean) - sigma^2 / 2`` so that ``E[X] = mean``; draws are
    rounded to whole tokens, then clipped (clipping moves the realised mean a little).
    """

    kind: Literal["lognormal"] = "lognormal"
    mean: float = Field(200.0, gt=0)
    sigma: float = Field(0.6, ge=0)
    min: int = Field(16, ge=1)
    max: int = Field(512, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> LognormalLengths:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        mu = math.log(self.mean) - self.sigma**2 / 2.0
        draws = np.rint(rng.lognormal(mu, self.sigma, size=n))
        return np.clip(draws, self.min, self.max).astype(np.int64)


class FixedLengths(_Dist):
    """Every sample has ``tokens`` tokens."""

    kind: Literal["fixed"] = "fixed"
    tokens: int = Field(128, ge=1)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.tokens, dtype=np.int64)


class UniformLengths(_Dist):
    """Whole-token lengths uniform on ``min..max`` inclusive."""

    kind: Literal["uniform"] = "uniform"
    min: int = Field(16, ge=1)
    max: int = Field(512, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> UniformLengths:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.integers(self.min, self.max + 1, size=n, dtype=np.int64)


LengthDist = Annotated[LognormalLengths | FixedLengths | UniformLengths, Field(discriminator="kind")]


class WorkloadSpec(BaseModel):
    """What to generate/score. ``path`` set: texts (and rollout prompts) come from that file.

    ``count``: samples (default 256 synthetic; all lines of a file). ``prompt``/``response``: length
    distributions in tokens. ``seed`` fixes everything drawn, so every process sees the same texts.
    """

    model_config = ConfigDict(extra="forbid")

    count: int | None = Field(None, ge=1)
    seed: int = 0
    prompt: LengthDist = Field(default_factory=lambda: FixedLengths(tokens=32))
    response: LengthDist = Field(default_factory=LognormalLengths)
    path: Path | None = None


@dataclass(frozen=True)
class Workload:
    """Concrete samples. Lists have one entry per sample; token arrays are int64 ``(n,)``.

    ``texts`` is what a reward model scores: prompt + response (synthetic) or the file's texts.
    ``responses`` is None for a file workload (responses are generated later, with
    ``response_tokens`` tokens each).
    """

    prompts: list[str]
    texts: list[str]
    response_tokens: np.ndarray
    prompt_tokens: np.ndarray | None
    responses: list[str] | None

    def __len__(self) -> int:
        return len(self.texts)


DEFAULT_COUNT = 256


def build_workload(spec: WorkloadSpec) -> Workload:
    """Draw (or read) the samples of ``spec``; same spec, same result, in any process."""
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(spec.seed).spawn(4)]
    if spec.path is not None:
        texts = read_texts(spec.path)[: spec.count]
        response_tokens = spec.response.sample(streams[1], len(texts))
        return Workload(list(texts), list(texts), response_tokens, None, None)
    n = spec.count or DEFAULT_COUNT
    prompt_tokens = spec.prompt.sample(streams[0], n)
    response_tokens = spec.response.sample(streams[1], n)
    prompts = _fill(streams[2], prompt_tokens)
    responses = _fill(streams[3], response_tokens)
    texts = [f"{p} {r}" for p, r in zip(prompts, responses, strict=True)]
    return Workload(prompts, texts, response_tokens, prompt_tokens, responses)


def _fill(rng: np.random.Generator, lengths: np.ndarray) -> list[str]:
    """One string of ``lengths[i]`` random words per entry."""
    words = np.array(WORDS)
    return [" ".join(words[rng.integers(0, len(words), size=int(k))]) for k in lengths]


def read_texts(path: str | Path) -> list[str]:
    """Texts from a ``.jsonl`` (``{"text": ...}`` per line) or ``.txt`` (one per line) file.

    Blank lines are skipped; any other problem names the file and line.
    """
    p = Path(path).expanduser()
    if p.suffix not in (".jsonl", ".txt"):
        raise RlsimError(f"text file {p} must end in .jsonl (a 'text' field per line) or .txt (a text per line)")
    text = read_user_text(p, "text file", missing_fix="pass a .jsonl (with a 'text' field) or .txt file")
    # split("\n"), not splitlines(): U+2028, \x0b, \x1c ... inside a text must not start a new one.
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if p.suffix == ".jsonl":
        texts = [_jsonl_text(p, no, line) for no, line in enumerate(lines, 1) if line.strip()]
    else:
        texts = [line for line in lines if line.strip()]
    if not texts:
        raise RlsimError(f"text file {p} holds no texts; add at least one non-blank line")
    return texts


def _jsonl_text(path: Path, lineno: int, line: str) -> str:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise RlsimError(f"{path}:{lineno} is not valid JSON ({err.msg}); write one JSON object per line") from None
    text = record.get("text") if isinstance(record, dict) else None
    if not isinstance(text, str):
        raise RlsimError(f'{path}:{lineno} has no string "text" field; write lines like {{"text": "..."}}')
    return text
