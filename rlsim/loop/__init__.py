"""The RLHF loop: config, schedules (sequential, overlapped, PPO's experience phase, async), roles, records, reports.

Entry point: ``rlsim.loop.run.run_loop(config, out)``; ``rlsim run CONFIG`` on the command line. The modules, by
what they do:

- Config: ``config`` (the ``rlsim run`` YAML as typed models, every error at once), ``algorithm_config`` (``kl``,
  ``reference``, ``critic``), ``async_config`` (the ``async`` section and its rules), ``conventions`` (the
  ``trainer.conventions`` presets: the step as rlsim, verl, OpenRLHF or TRL computes it).
- Driving: ``run`` (``run_loop``: a session with a progress bar, outputs rewritten after each step), ``driver``
  (``LoopSession``: start Ray or join a cluster, place the actors, run steps), ``sync`` (real weight reload or a
  configured cost), ``deadline`` (a stalled phase fails the step naming it).
- Schedules: ``schedules`` (one GRPO step, sequential or overlapped, over a small backend interface), ``ppo_step``
  (the step with the experience roles), ``async_schedule``, ``async_session``, ``async_types`` and ``staleness``
  (generation ahead of training within a staleness bound).
- Backends: ``local_backend`` and ``ray_backend`` (the step backend in-process and on Ray), ``ray_experience``
  (the reference and the critic as actors), ``async_local`` and ``async_ray`` (the async schedule's backends).
- Roles: ``reward_stage`` (rollouts in, rewards out), ``trainer`` (the policy update), ``reference``, ``critic``,
  ``packing`` (rollouts as padded tensors), ``build`` (picklable factories that build each role in its actor).
- Outputs: ``records`` (per-step records from the event timeline), ``report`` (``report.md`` and its figures),
  ``async_records`` (what an async run adds to both).
"""
