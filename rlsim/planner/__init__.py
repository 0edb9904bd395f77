"""The capacity planner: predict RLHF step time on clusters this machine cannot hold.

Its parts, each a subpackage, in the order they depend on each other:

- ``profile/``: what the simulation knows about one hardware kind: the versioned JSON profile
  (``schema``), every fit of its models (``fitting/``: to measurements, loop runs, logs and GPU rows),
  users' training logs (``logs/``) and illustrative examples (``examples``).
- ``spec/``: what is asked: the workload (``rlsim.workloads``' length distributions), the ``rlsim plan``
  YAML (``cluster``) and a placement resolved into engines and scorer replicas (``placement``).
- ``sim/``: the discrete-event simulation: ``events``, ``generation``, ``scoring``, one ``step`` with
  contention, PPO's roles on shared cores (``core_sharing``, ``ppo_roles``), and ``evaluate`` (a
  placement over several steps, summarised).
- ``search/``: ``rlsim plan``: the placement ``grid``, the ``plan`` flow and its ``report``.
- ``measure/``: what runs on this machine: real ``rlsim run`` loops (``loop_set``, ``loop_runner``,
  ``loop_results``, ``machine_load``), real scorers and PPO's roles timed (``scorers``, ``roles``), and
  ``rlsim profile`` (``build_profile``, with ``sections``: fits of calibration runs as profile sections).
- ``validate/``: ``rlsim plan validate``: ``predict`` (the simulation's step time for one loop config),
  ``compare`` predicted with measured step time (``throughput`` for async runs), ``anchor``; ``command``.

The GPU step model (``docs/gpu-planner.md``) sits in the same rooms: ``spec.model_shapes`` (architectures)
and ``spec.gpu_run`` (its YAML), ``profile.gpu_datasheets`` and ``profile.gpu_efficiency``,
``sim.gpu_generation`` (vLLM engines) and ``sim.gpu_step`` (NeMo-RL's phases), ``profile.fitting.gpu`` and
``validate.published_runs`` / ``validate.gpu_published`` (the published NeMo-RL rows).

Plain Python + numpy/pydantic: nothing here imports Ray, vLLM, torch or ``rlsim.loop`` at import
time (``tests/planner/test_layering.py`` checks it). Only ``measure.scorers`` (real scorers),
``measure.roles`` (the reference and critic) and ``measure.loop_runner`` (real loop runs through
``rlsim.loop``) start real work, through imports inside their functions.
"""
