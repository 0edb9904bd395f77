"""Reward fidelity: what a faster (reduced-precision) runtime does to rewards, in RLHF terms.

The texts scored (the fidelity corpus and its calibration split), the metrics and the pass rules are
``rlsim.corpus``'s (``fidelity_corpus``, ``agreement``).

- ``check``: score the corpus with runtimes and apply the pass rules.
- ``cache``: those figures kept per model, runtime and machine, so the next experiment or benchmark need not
  re-score.
- ``verify``: the engine of ``rlsim verify``: every runtime against fp32 eager on one fixed batch, and with the
  pass rules on the corpus too.

Which layers cost the order in int8 (``rlsim verify --sensitivity``) is how the int8-mixed runtimes are built, so
it is ``rlsim.scoring.int8_sensitivity``; scoring imports nothing from here (``tests/test_import_rules.py``).
"""
