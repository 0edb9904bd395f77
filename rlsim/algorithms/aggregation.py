"""How per-token losses become one number: the loss aggregation mode, as per-token weights.

The loss of an optimizer step is ``sum_t w_t * loss_t`` over the step's response tokens. Writing it
as weights lets the trainer sum micro-batch by micro-batch (gradient accumulation) and still get the
gradient of the whole batch's loss, whatever the micro-batch size. With ``N`` sequences, ``T`` tokens
in all and ``L_i`` tokens in sequence ``i``:

- ``token-mean`` (rlsim's default; verl ``loss_agg_mode: token-mean``, OpenRLHF's token-level loss,
  TRL's ``dapo``): ``w = 1 / T``. Every token counts the same, so long responses weigh more.
- ``seq-mean-token-mean`` (verl; OpenRLHF with token-level loss off; TRL's ``grpo``): ``w = 1 / (N L_i)``.
  Every sequence counts the same.
- ``seq-mean-token-sum`` (verl): ``w = 1 / N``.
- ``seq-mean-token-sum-norm`` (Dr. GRPO's constant normaliser, as TRL's ``dr_grpo`` computes it):
  ``w = 1 / (N * scale)`` with ``scale`` a constant (TRL: ``max_completion_length``), so neither
  length nor the batch's token count rescales a token. verl's mode of this name divides each
  micro-batch's token sum by ``loss_scale_factor`` and scales by the accumulation factor, i.e. by
  ``micro-batches * scale`` rather than ``N * scale``; the two agree at one sequence per micro-batch.

Sources: ``verl/trainer/ppo/core_algos.py`` ``agg_loss``; ``openrlhf/models/loss.py``
``aggregate_loss``; ``trl/trainer/grpo_trainer.py`` ``_compute_loss`` (the ``loss_type`` branches).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np

LossAggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
LOSS_AGGREGATIONS: tuple[str, ...] = get_args(LossAggregation)


def token_weights(
    lengths: Sequence[int],
    mode: LossAggregation,
    batch_sequences: int,
    batch_tokens: int,
    scale: float | None = None,
) -> np.ndarray:
    """Per-token weights ``(sum(lengths),)`` float32 for the sequences of ``lengths`` (tokens each, in
    order), part of a batch of ``batch_sequences`` sequences and ``batch_tokens`` tokens; ``scale`` is
    the ``seq-mean-token-sum-norm`` constant. Raises ``ValueError`` on an unknown mode or a missing scale."""
    n = np.asarray(lengths, dtype=np.float64)
    if mode == "token-mean":
        per_seq = np.full_like(n, 1.0 / max(batch_tokens, 1))
    elif mode == "seq-mean-token-mean":
        per_seq = 1.0 / (max(batch_sequences, 1) * np.maximum(n, 1))
    elif mode == "seq-mean-token-sum":
        per_seq = np.full_like(n, 1.0 / max(batch_sequences, 1))
    elif mode == "seq-mean-token-sum-norm":
        if scale is None or not scale > 0:
            raise ValueError(f"seq-mean-token-sum-norm needs a positive constant scale (got {scale})")
        per_seq = np.full_like(n, 1.0 / (max(batch_sequences, 1) * scale))
    else:
        raise ValueError(f"unknown loss aggregation {mode!r}; valid: {', '.join(LOSS_AGGREGATIONS)}")
    return np.repeat(per_seq, n.astype(np.int64)).astype(np.float32)
