"""Train ``minilm-rm``'s reward head on a preference task, so its rewards mean something.

Task: a fluent standard-library paragraph is preferred over a corrupted copy of itself (words
shuffled, a sentence repeated, sentences cut short; ``rlsim.corpus.text_source.corrupt``).
The pretrained encoder's lower layers stay frozen: their output is computed once per text, and
only the last ``layers`` encoder layer(s), the pooler and the classifier are trained on it with
a Bradley-Terry loss ``-log sigmoid(r_fluent - r_corrupted)`` (AdamW, pairs in fixed batches,
batch order shuffled by the seed). A head on the frozen ``[CLS]`` state alone reached about 82%
held-out accuracy; letting the last layer re-attend over the tokens gets past 95%. The model
keeps its Hugging Face architecture, so every runtime (ONNX export, int8, native) loads it unchanged.

Held-out pairs come from modules never seen in training (splits are by module), and their
pairwise accuracy is written next to the weights (``HEAD_REPORT``) for ``rlsim verify``.
Same config (seed included) and thread count -> same weights: the model runs in eval mode (no
dropout), and the data, its batching and the batch order are fixed by the seed.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rlsim.corpus.fidelity_corpus import HELDOUT_BUCKETS, TRAIN_BUCKETS, paragraphs_in
from rlsim.corpus.text_source import corrupt

HEAD_REPORT = "rlsim_head.json"
TASK = "fluent stdlib paragraph preferred over a corrupted copy (shuffle / repeat / cut)"


@dataclass(frozen=True)
class HeadTraining:
    """Sizes of the preference task and the optimiser; the defaults are what ``minilm-rm`` is built with.

    ``train_pairs``/``heldout_pairs``: at most this many (fluent, corrupted) pairs, one per paragraph
    (held-out: ``heldout_copies`` corruptions per paragraph). ``max_tokens`` truncates the texts
    (keeping their end, as scoring does by default); cost grows with it.
    """

    seed: int = 1234
    train_pairs: int = 1100
    heldout_pairs: int = 400
    heldout_copies: int = 2
    max_tokens: int = 128
    layers: int = 1
    epochs: int = 2
    pairs_per_batch: int = 16
    lr_layers: float = 1e-4
    lr_head: float = 1e-3
    weight_decay: float = 1e-2


def preference_pairs(buckets: tuple[int, ...], count: int, seed: int, copies: int = 1) -> list[tuple[str, str]]:
    """Up to ``count`` (fluent, corrupted) pairs, ``copies`` per paragraph of a module in ``buckets``."""
    rng = random.Random(seed)
    pool = [p.text for p in paragraphs_in(buckets)]
    rng.shuffle(pool)
    pairs: list[tuple[str, str]] = []
    for text in pool:
        for _ in range(copies):
            bad = corrupt(text, rng, strength=rng.uniform(0.5, 1.0))
            if bad != text and len(pairs) < count:
                pairs.append((text, bad))
    return pairs


def train_head(model, tokenizer, config: HeadTraining) -> dict:
    """Train the last ``config.layers`` layers, pooler and classifier of a ``BertForSequenceClassification``
    in place; returns the report (accuracies, pair counts, timings in seconds)."""
    import torch

    t0 = time.perf_counter()
    model.eval()  # no dropout: training is deterministic
    train = preference_pairs(TRAIN_BUCKETS, config.train_pairs, config.seed)
    held = preference_pairs(HELDOUT_BUCKETS, config.heldout_pairs, config.seed + 1, config.heldout_copies)
    top = _Top(model, config.layers)
    train_batches = _frozen_batches(model, tokenizer, train, config)
    held_batches = _frozen_batches(model, tokenizer, held, config)
    features_s = time.perf_counter() - t0

    torch.manual_seed(config.seed)
    opt = torch.optim.AdamW(
        [{"params": top.layer_parameters(), "lr": config.lr_layers},
         {"params": top.head_parameters(), "lr": config.lr_head}],
        weight_decay=config.weight_decay,
    )  # fmt: skip
    rng = random.Random(config.seed)
    losses = []
    for _ in range(config.epochs):
        order = list(range(len(train_batches)))
        rng.shuffle(order)
        for i in order:
            rewards = top(*train_batches[i])
            loss = -torch.nn.functional.logsigmoid(rewards[0::2] - rewards[1::2]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    return {
        "task": TASK,
        "config": asdict(config),
        "train_pairs": len(train),
        "heldout_pairs": len(held),
        "final_epoch_loss": sum(losses[-len(train_batches) :]) / len(train_batches),
        "train_accuracy": _accuracy(top, train_batches),
        "heldout_accuracy": _accuracy(top, held_batches),
        "features_s": features_s,
        "train_s": time.perf_counter() - t0 - features_s,
    }


class _Top:
    """The trained part: the last ``layers`` encoder layers, then pooler (dense + tanh) and classifier."""

    def __init__(self, model, layers: int) -> None:
        self.model = model
        self.first = model.config.num_hidden_layers - layers
        self.layers = list(model.bert.encoder.layer[self.first :])

    def layer_parameters(self) -> list:
        return [p for layer in self.layers for p in layer.parameters()]

    def head_parameters(self) -> list:
        return list(self.model.bert.pooler.parameters()) + list(self.model.classifier.parameters())

    def __call__(self, hidden, mask):
        """Rewards ``(batch,)`` from the frozen layers' output ``(batch, seq, hidden)`` and mask ``(batch, seq)``."""
        import torch

        # Additive mask, the form BERT's eager and SDPA attention both take: padding gets -inf-like scores.
        additive = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for layer in self.layers:
            out = layer(hidden, attention_mask=additive)
            hidden = out[0] if isinstance(out, tuple) else out
        return self.model.classifier(self.model.bert.pooler(hidden))[:, 0]


def _frozen_batches(model, tokenizer, pairs: list[tuple[str, str]], config: HeadTraining) -> list[tuple]:
    """Per batch of pairs (fluent at even rows, corrupted at odd), the output of the frozen layers and the mask.

    Pairs are batched by length (little padding); the batches are fixed, only their order is shuffled.
    """
    import torch

    first = model.config.num_hidden_layers - config.layers
    tokenizer.truncation_side = "left"
    ordered = sorted(pairs, key=lambda p: (len(p[0]) + len(p[1]), p))
    out = []
    with torch.no_grad():  # not inference_mode: the cached tensors feed autograd later
        for i in range(0, len(ordered), config.pairs_per_batch):
            texts = [t for pair in ordered[i : i + config.pairs_per_batch] for t in pair]
            enc = tokenizer(texts, padding=True, truncation=True, max_length=config.max_tokens, return_tensors="pt")
            hidden = model.bert(**enc, output_hidden_states=True).hidden_states[first]
            out.append((hidden, enc["attention_mask"]))
    return out


def _accuracy(top: _Top, batches: list[tuple]) -> float:
    import torch

    with torch.no_grad():
        wins = [(r[0::2] > r[1::2]).float() for r in (top(*b) for b in batches)]
    return float(torch.cat(wins).mean())


def write_report(folder: Path, report: dict) -> None:
    (folder / HEAD_REPORT).write_text(json.dumps(report, indent=2))


def read_report(folder: Path) -> dict | None:
    """The training report saved next to a built model, or None for models rlsim did not train."""
    path = Path(folder) / HEAD_REPORT
    return json.loads(path.read_text()) if path.is_file() else None
