"""``rlsim plan validate``: the planner's step time against the real loop's, per configuration.

``predict``: the simulation's prediction for one loop configuration; ``compare``: predicted vs measured for
each configuration of a loop set, and the report (``throughput``: an async run's rollouts per hour;
``anchor``: errors corrected for the host's drift);
``command``: the command without argparse (check every input, run, show the table).
"""
