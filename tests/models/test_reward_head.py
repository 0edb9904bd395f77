"""minilm-rm's trained head: good enough on held-out pairs, reproducible, and trained on modules it is not tested on."""

import pytest

from rlsim.corpus.fidelity_corpus import HELDOUT_BUCKETS, SPLITS, TRAIN_BUCKETS
from rlsim.corpus.text_source import split_of, stdlib_paragraphs
from rlsim.models import resolve_reward_model
from rlsim.models.reward_head import HeadTraining, preference_pairs, read_report

SMALL = HeadTraining(train_pairs=24, heldout_pairs=8, heldout_copies=1, max_tokens=32, epochs=1, pairs_per_batch=8)


def _train(config: HeadTraining):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rlsim.models.builtin import minilm_source_dir

    torch.manual_seed(config.seed)
    model = AutoModelForSequenceClassification.from_pretrained(str(minilm_source_dir()), num_labels=1)
    from rlsim.models.reward_head import train_head

    report = train_head(model, AutoTokenizer.from_pretrained(str(minilm_source_dir())), config)
    return {k: v.clone() for k, v in model.state_dict().items()}, report


def test_builtin_minilm_rm_reaches_95_percent_on_held_out_pairs():
    report = read_report(resolve_reward_model("minilm-rm").path)
    assert report is not None, "minilm-rm was built without its training report"
    assert report["heldout_pairs"] >= 250
    assert report["heldout_accuracy"] >= 0.95
    assert read_report(resolve_reward_model("minilm-rm-random").path) is None  # the random head is kept apart


def test_same_seed_same_weights_other_seed_other_weights():
    first, report = _train(SMALL)
    second, _ = _train(SMALL)
    assert report["train_pairs"] == 24 and report["heldout_pairs"] == 8
    assert first.keys() == second.keys()
    assert all(bool((first[k] == second[k]).all()) for k in first)
    other, _ = _train(HeadTraining(**{**SMALL.__dict__, "seed": 7}))
    assert not bool((other["classifier.weight"] == first["classifier.weight"]).all())
    # Frozen layers are untouched: only the last layer, the pooler and the classifier move.
    assert bool((other["bert.encoder.layer.0.attention.self.query.weight"]
                 == first["bert.encoder.layer.0.attention.self.query.weight"]).all())  # fmt: skip


def test_training_and_held_out_pairs_come_from_different_modules():
    module_of = {p.text: p.module for p in stdlib_paragraphs()}
    buckets = {name: split_of(p, SPLITS) for p in stdlib_paragraphs() for name in [p.module]}
    train = {module_of[good] for good, _ in preference_pairs(TRAIN_BUCKETS, 200, seed=0)}
    held = {module_of[good] for good, _ in preference_pairs(HELDOUT_BUCKETS, 200, seed=0)}
    assert train and held and not train & held
    assert {buckets[m] for m in held} <= set(HELDOUT_BUCKETS)
    # Every held-out "worse" text really differs from its fluent original.
    assert all(good != bad for good, bad in preference_pairs(HELDOUT_BUCKETS, 50, seed=0, copies=2))


@pytest.mark.parametrize("count", [5, 40])
def test_pair_count_is_capped(count):
    assert len(preference_pairs(TRAIN_BUCKETS, count, seed=0)) == count
