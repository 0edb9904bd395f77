"""Reward fidelity: what a faster (reduced-precision) runtime does to rewards, in RLHF terms.

The texts scored (the fidelity corpus and its calibration split), the metrics and the pass rules are
``rlsim.corpus``'s (``fidelity_corpus``, ``agreement``).

- ``check``: score the corpus with runtimes and apply the pass rules.
- ``sensitivity``: which weight MatMuls cost the reward order when quantized to int8 alone (``rlsim verify
  --sensitivity``), measured on the calibration split.
"""
