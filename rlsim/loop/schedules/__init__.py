"""The loop's schedules: in what order generation, scoring, the experience roles and the update run.

``step`` (one GRPO/RLOO step, ``sequential`` or ``overlapped``, over the loop's ``Backend``
(``rlsim.loop.backends.protocol``), and the accounting every step checks), ``ppo`` (the same step with PPO's
experience phase: reference and critic), ``asynchronous/`` (``schedule: async``: generation ahead of training
within a staleness bound).
"""
