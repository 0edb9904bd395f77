"""``rlsim plan validate``: the planner's step time against the real loop's, per configuration.

``compare``: predicted vs measured for each configuration of a loop set, and the report;
``command``: the command without argparse (check every input, run, show the table).
"""
