"""The fidelity corpus: reproducible, big enough, grouped, in the token range, kept apart from calibration."""

import random

import numpy as np

from rlsim.corpus.fidelity_corpus import (
    CALIBRATION_BUCKETS,
    CORPUS_BUCKETS,
    HELDOUT_BUCKETS,
    SPLITS,
    TRAIN_BUCKETS,
    build_corpus,
    calibration_texts,
)
from rlsim.corpus.text_source import corrupt, stdlib_paragraphs


def test_corpus_is_reproducible_and_seed_dependent():
    a, b = build_corpus(), build_corpus()
    assert a.texts == b.texts and np.array_equal(a.groups, b.groups) and a.digest == b.digest
    assert build_corpus(seed=1).digest != a.digest


def test_corpus_size_groups_and_token_lengths():
    from transformers import AutoTokenizer

    from rlsim.models.builtin import minilm_source_dir

    corpus = build_corpus()
    assert len(corpus.texts) >= 256
    sizes = np.bincount(corpus.groups)
    assert sizes.min() >= 4 and sizes.max() <= 16
    # Members of a group are contiguous, so group ids can be read as "prompt index".
    assert np.all(np.diff(corpus.groups) >= 0)
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_source_dir()))
    lengths = [len(ids) for ids in tokenizer(list(corpus.texts))["input_ids"]]
    assert min(lengths) >= 16 and max(lengths) <= 512
    # Groups mix quality: some texts are corrupted copies, so the corpus is not all fluent prose.
    fluent = {p.text for p in stdlib_paragraphs()}
    corrupted = sum(t not in fluent for t in corpus.texts)
    assert 0.25 < corrupted / len(corpus.texts) < 0.75


def test_splits_are_disjoint_by_module():
    parts = [set(CORPUS_BUCKETS), set(CALIBRATION_BUCKETS), set(HELDOUT_BUCKETS), set(TRAIN_BUCKETS)]
    assert set().union(*parts) == set(range(SPLITS)) and sum(len(p) for p in parts) == SPLITS
    module_of = {p.text: p.module for p in stdlib_paragraphs()}
    corpus_modules = {module_of[t] for t in build_corpus().texts if t in module_of}
    calib_modules = {module_of[t] for t in calibration_texts() if t in module_of}
    assert corpus_modules and calib_modules and not corpus_modules & calib_modules
    assert not set(build_corpus().texts) & set(calibration_texts())


def test_corrupt_damages_the_text():
    text = "The quick brown fox jumps over the lazy dog. It was not amused at all. Then it left the field."
    outs = {corrupt(text, random.Random(seed)) for seed in range(20)}
    assert text not in outs and len(outs) > 3
