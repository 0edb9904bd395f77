"""The RLHF loop: config, schedules (sequential, overlapped, PPO's experience phase, async), roles, records, reports.

Entry point: ``rlsim.loop.run.run_loop(config, out)``; ``rlsim run CONFIG`` on the command line. Its parts:

- ``config/``: the ``rlsim run`` YAML as typed models, every error at once (``algorithm``: ``kl``,
  ``reference``, ``critic``; ``asynchronous``: the ``async`` section; ``conventions``: the step as rlsim,
  verl, OpenRLHF or TRL computes it).
- ``run`` (``run_loop``: a session with a progress bar, outputs rewritten after each step), ``driver``
  (``LoopSession``: start Ray or join a cluster, place the actors, run steps), ``sync`` (real weight reload
  or a configured cost), ``deadline`` (a stalled phase fails the step naming it).
- ``schedules/``: one step ``sequential`` or ``overlapped`` (``step``), with PPO's experience roles (``ppo``),
  and ``asynchronous/`` (generation ahead of training within a staleness bound).
- ``backends/``: what a schedule calls (``protocol``: one futures-style ``Backend``), in this process
  (``local``) and on Ray (``ray``, with the faults it injects in ``faults``).
- ``roles/``: ``reward_stage``, ``trainer``, ``reference``, ``critic``, ``packing`` and ``build`` (picklable
  factories that build each role in its actor).
- ``outputs/``: ``records`` (per-step records from the event timeline), ``report`` (``report.md`` and its
  figures), ``asynchronous`` (what an async run adds to both).
"""
