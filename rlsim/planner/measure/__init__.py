"""What runs on this machine for the planner: real loops, timed scorers and roles, and ``rlsim profile``.

``loop_set`` (a set of loop configurations as YAML, and the quiet-machine gate), ``loop_runner`` (runs them
through ``rlsim.loop``, imported inside functions only), ``loop_results`` (reads their ``results.json``),
``machine_load`` (other programs' share of the cores), ``scorers`` and ``roles`` (real scorers, and PPO's
reference and critic, timed over a grid), ``sections`` (fits of calibration runs as profile sections) and
``build_profile`` (the ``rlsim profile`` flow without the command line).
"""
