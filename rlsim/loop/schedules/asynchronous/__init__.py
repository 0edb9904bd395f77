"""``schedule: async``: generation, scoring and training as concurrent pipelines within a staleness bound.

``types`` (the non-blocking backend interface and the settings), ``staleness`` (the buffer of scored groups and
the ledger of policy versions), ``pipeline`` (the schedule itself, ``AsyncPipeline``), ``session`` (the
pipeline on a started ``LoopSession``'s actors, step by step, with checkpoints for resume).
"""
