"""The capacity planner: predict RLHF step time on clusters this machine cannot hold.

Its parts, each a subpackage, in the order they depend on each other:

- ``profile/``: what the simulation knows about one hardware kind: the versioned JSON profile
  (``schema``), least-squares fits of its models (``fitting``) and illustrative examples (``examples``).
- ``spec/``: what is asked: the workload (``rlsim.workloads``' length distributions), the ``rlsim plan``
  YAML (``cluster``) and a placement resolved into engines and scorer replicas (``placement``).
- ``sim/``: the discrete-event simulation: ``events``, ``generation``, ``scoring``, one ``step`` with
  contention, PPO's roles on shared cores (``core_sharing``, ``ppo_roles``), and ``evaluate`` (a
  placement over several steps, summarised).
- ``search/``: ``rlsim plan``: the placement ``grid``, the ``plan`` flow and its ``report``.
- ``runs/``: real ``rlsim run`` loops on this machine, which calibration and validation both use: the
  ``loop_set`` YAML, the ``loop_runner``, the ``loop_results`` reader, ``machine_load`` (other
  programs' share of the cores) and ``predict`` (the simulation's step time for one loop config).
- ``calibrate/``: ``rlsim profile``: ``build`` a profile from ``measure_scorers`` (real scorers timed),
  ``measure_roles`` (PPO's reference and critic timed),
  ``loop_fits`` (fits to real loop runs) and ``sections`` (those fits as profile sections).
- ``validate/``: ``rlsim plan validate``: ``compare`` predicted with measured step time; ``command``.

The GPU step model (``docs/gpu-planner.md``) sits in the same rooms: ``spec.model_shapes`` (architectures)
and ``spec.gpu_run`` (its YAML), ``profile.gpu_datasheets`` and ``profile.gpu_efficiency``,
``sim.gpu_generation`` (vLLM engines) and ``sim.gpu_step`` (NeMo-RL's phases), ``calibrate.gpu_fit`` and
``validate.published_runs`` / ``validate.gpu_published`` (the published NeMo-RL rows).

Plain Python + numpy/pydantic: nothing here imports Ray, vLLM, torch or ``rlsim.loop`` at import
time (``tests/planner/test_layering.py`` checks it). Only ``calibrate.measure_scorers`` (real scorers),
``calibrate.measure_roles`` (the reference and critic) and ``runs.loop_runner`` (real loop runs through
``rlsim.loop``) start real work, through imports inside their functions.
"""
