"""``rlsim profile``: measure this machine and fit a profile from the measurements.

``build``: the ``rlsim profile`` flow without the command line (``ProfileConfig``, ``build_profile``);
``measure_scorers``: time real scorers over a batch x length grid (imports them inside functions);
``measure_roles``: time PPO's reference and critic the same way, and what two processes on one pool lose;
``loop_fits``: per-step fits of generation, update/sync, in-loop scoring and contention to real loop
runs; ``sections``: those fits as profile sections.
"""
