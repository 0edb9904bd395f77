"""The capacity planner: predict RLHF step time on clusters this machine cannot hold.

``profile``: the versioned JSON profile (per hardware kind) and its checks; ``fitting``: least-squares
fits from measurements; ``calibrate``: per-step fits of generation, update/sync, scoring in the loop
and contention to real loop runs, and ``calibrated_sections`` turns them into profile sections;
``generation`` / ``scorer_sim`` / ``simulate``: the discrete-event step simulation; ``evaluate`` /
``search`` / ``plan``: placements, ranking and the ``rlsim plan`` flow; ``predict``: ``predict_step``
for one loop configuration; ``validation_set`` / ``validation`` / ``validate_cli``: ``rlsim plan
--validate`` (predicted vs measured on real loop runs); ``machine_load``: how much other programs
used the cores meanwhile.

Plain Python + numpy/pydantic: nothing here imports Ray, vLLM or torch at import time. Only
``measure_scorers`` (real scorers) and ``loop_runner`` (real loop runs through ``rlsim.loop``) start
real work, through imports inside their functions.
"""
