"""Real English text, offline and reproducible, split so no two uses share a topic; and the yardstick that runtimes'
rewards on it are judged by.

- ``text_source``: paragraphs from the standard library's docstrings, and how to corrupt one.
- ``fidelity_corpus``: the fidelity corpus (groups like GRPO's samples per prompt), the int8 calibration split
  and the reward head's training and held-out buckets.
- ``agreement``: rank and advantage metrics of a runtime's rewards against a reference's, the pass rules, and the
  length-ordered batches every compared runtime is scored in.

A leaf: the reward models (the trained head), the scoring runtimes (int8 calibration, the int8-mixed layer choice)
and the fidelity checks read it, and it imports none of them (``tests/test_import_rules.py``).
"""
