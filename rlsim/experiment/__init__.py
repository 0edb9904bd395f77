"""``rlsim experiment contention``: how much capacity a faster scoring runtime frees on a shared pool.

Per runtime, on the ``shared`` placement: generation alone, scoring alone, both together (the
``overlapped`` schedule) and a time-boxed variant, in R repeats. ``config`` validates the experiment,
``conditions`` runs one condition, ``accounting`` measures pool time by process accounting,
``capacity`` and ``analysis`` turn the records into figures with CIs (paired with the baseline),
``stopping`` decides how many repeats (a count, or a precision target within a budget), ``report``/``plots``
write them out, ``runner`` drives it all (``session`` is the only module that touches Ray). With
PPO's roles the together step is the PPO step and ``role_analysis`` says where freed capacity went
among them; under ``schedule: async`` the together condition is an async pipeline
(``asynchronous.condition``) and ``asynchronous.analysis`` reports its outcomes; ``schedule_report`` adds both to
the results and the report.
"""
