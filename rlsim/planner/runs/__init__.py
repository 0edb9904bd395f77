"""Real ``rlsim run`` loops on this machine, which calibration and validation both use.

``loop_set``: a set of loop configurations as YAML (and the quiet-machine gate); ``loop_runner``:
runs them (through ``rlsim.loop``, imported inside functions only); ``loop_results``: reads their
``results.json``; ``machine_load``: how much other programs used the cores meanwhile; ``predict``:
the simulation's prediction for one loop configuration.
"""
