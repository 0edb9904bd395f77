"""The capacity planner: predict RLHF step time on clusters this machine cannot hold.

``profile``: the versioned JSON profile (per hardware kind) and its checks; ``fitting``: least-squares
fits from measurements; ``generation`` / ``scorer_sim`` / ``simulate``: the discrete-event step
simulation; ``evaluate`` / ``search`` / ``plan``: placements, ranking and the ``rlsim plan`` flow;
``predict``: ``predict_step`` for one loop configuration (``plan --validate``).

Plain Python + numpy/pydantic: nothing here imports Ray, vLLM or torch. Only ``measure_scorers``
(the measuring side of ``rlsim profile``) loads real scorers, lazily, inside its functions.
"""
