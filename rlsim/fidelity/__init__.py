"""Reward fidelity: what a faster (reduced-precision) runtime does to rewards, in RLHF terms.

- ``text_source``: real English paragraphs from the standard library's docstrings (offline, reproducible).
- ``corpus``: the fidelity corpus (groups like GRPO's samples per prompt) and its calibration split.
- ``metrics``: rank and advantage metrics of a runtime's rewards against fp32 eager.
- ``check``: score the corpus with runtimes and apply the pass rules.
- ``sensitivity``: which weight MatMuls cost the reward order when quantized to int8 alone (``rlsim verify
  --sensitivity``), measured on the calibration split.
"""
