"""``schedule: async`` simulated: pipelined generation, scoring and training within a staleness bound.

``costs`` (what each pipeline call costs on a placement, from the profile's models), ``pipeline`` (the
stages with their queue), ``evaluate`` (a placement simulated and summarised like the sync ``Evaluation``).
"""
