"""The fidelity corpus: real paragraphs in groups, like the samples GRPO scores for one prompt.

Built from the standard library's docstrings (``text_source``), reproducibly: the same Python
and seed give the same texts, groups and order (``FidelityCorpus.digest`` says which one was
used). Paragraphs are split by *module* into disjoint parts, so the corpus, the int8 calibration
set and the reward head's training and held-out pairs never share a topic:

====================  ========================================
module bucket (of 8)  used for
====================  ========================================
0, 1                  fidelity corpus (``build_corpus``)
2                     calibration (``calibration_texts``)
3                     reward-head held-out pairs
4 .. 7                reward-head training pairs
====================  ========================================

A group takes 4, 8 or 16 paragraphs of one module; about half of them are corrupted with random
strength, so a group holds samples of mixed quality, as a policy's samples do.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from rlsim.corpus.text_source import MAX_WORDS, Paragraph, corrupt, split_of, stdlib_paragraphs

SPLITS = 8
CORPUS_BUCKETS = (0, 1)
CALIBRATION_BUCKETS = (2,)
HELDOUT_BUCKETS = (3,)
TRAIN_BUCKETS = (4, 5, 6, 7)
GROUP_SIZES = (4, 8, 16)
# 14 words are at least 16 WordPiece tokens with [CLS] and [SEP].
MIN_CORPUS_WORDS = 14


@dataclass(frozen=True)
class FidelityCorpus:
    """``texts[i]`` belongs to group ``groups[i]`` (int ids, members contiguous)."""

    texts: tuple[str, ...]
    groups: np.ndarray
    seed: int

    @property
    def digest(self) -> str:
        """First 12 hex digits of a SHA-256 over texts and groups: names the exact corpus in results."""
        h = hashlib.sha256()
        for text, g in zip(self.texts, self.groups.tolist(), strict=True):
            h.update(f"{g}\x00{text}\x00".encode())
        return h.hexdigest()[:12]

    @property
    def group_count(self) -> int:
        return int(len(np.unique(self.groups)))


def paragraphs_in(buckets: tuple[int, ...]) -> list[Paragraph]:
    """Every paragraph whose module falls in ``buckets``, in the source's fixed order."""
    return [p for p in stdlib_paragraphs() if split_of(p, SPLITS) in buckets]


def build_corpus(min_texts: int = 320, seed: int = 0, buckets: tuple[int, ...] = CORPUS_BUCKETS) -> FidelityCorpus:
    """At least ``min_texts`` texts in groups of 4, 8 or 16 (fewer only if the source runs out).

    Each module's paragraphs are shuffled and cut into groups (a paragraph is used once), the
    groups are shuffled, and whole groups are taken until ``min_texts`` is reached.
    ``buckets``: which module buckets the paragraphs come from (the table above).
    """
    rng = random.Random(seed)
    by_module: dict[str, list[str]] = defaultdict(list)
    for p in paragraphs_in(buckets):
        if len(p.text.split()) >= MIN_CORPUS_WORDS:
            by_module[p.module].append(p.text)
    chunks: list[list[str]] = []
    for module in sorted(by_module):
        pool = by_module[module]
        rng.shuffle(pool)
        while len(pool) >= GROUP_SIZES[0]:
            size = max(n for n in GROUP_SIZES if n <= min(rng.choice(GROUP_SIZES), len(pool)))
            chunks.append(pool[:size])
            pool = pool[size:]
    rng.shuffle(chunks)
    texts: list[str] = []
    groups: list[int] = []
    for gid, chunk in enumerate(chunks):
        if len(texts) >= min_texts:
            break
        texts += [_maybe_corrupt(t, rng) for t in chunk]
        groups += [gid] * len(chunk)
    return FidelityCorpus(tuple(texts), np.asarray(groups, dtype=np.int64), seed)


def _maybe_corrupt(text: str, rng: random.Random) -> str:
    if rng.random() >= 0.5:
        return text
    bad = corrupt(text, rng, strength=rng.uniform(0.2, 1.0))
    # Keep every text within 16..512 tokens (a repeated long sentence can pass 512).
    return bad if MIN_CORPUS_WORDS <= len(bad.split()) <= MAX_WORDS else text


def calibration_corpus(min_texts: int = 160, seed: int = 0) -> FidelityCorpus:
    """The calibration split in groups, built like the corpus: what a choice of precision per layer is made on
    (``rlsim.scoring.int8_sensitivity``), so the corpus that judges the result never took part in it."""
    return build_corpus(min_texts, seed, CALIBRATION_BUCKETS)


def calibration_texts(count: int = 64, seed: int = 0) -> list[str]:
    """``count`` texts from modules the corpus never uses, for int8 static calibration (same mix of corruptions)."""
    rng = random.Random(seed)
    pool = [p.text for p in paragraphs_in(CALIBRATION_BUCKETS)]
    rng.shuffle(pool)
    return [_maybe_corrupt(t, rng) for t in pool[:count]]
