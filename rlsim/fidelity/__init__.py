"""Reward fidelity: what a faster (reduced-precision) runtime does to rewards, in RLHF terms.

The texts scored (the fidelity corpus and its calibration split), the metrics and the pass rules are
``rlsim.corpus``'s (``fidelity_corpus``, ``agreement``).

- ``check``: score the corpus with runtimes and apply the pass rules.
"""
