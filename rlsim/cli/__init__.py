"""The ``rlsim`` command line: ``main`` builds the parser and runs one subcommand per ``<name>_cmd`` module.

- ``main``: the entry point; user errors end in one line and exit status 2, SIGTERM in 143, Ctrl-C in 130.
- ``common``: what the subcommands share: the one-line-error parser, range-checked number types, scorer flags.
- ``verify_cmd``, ``score_cmd``, ``export_cmd``: every runtime against eager; a file of texts into rewards; ONNX export.
- ``serve_cmd``: the reward-scoring HTTP server around any runtime.
- ``bench_cmd``: ``rlsim bench scoring``, runtimes x batchers x batch sizes with confidence intervals.
- ``run_cmd``: ``rlsim run CONFIG``, the main job.
- ``experiment_cmd``: ``rlsim experiment contention CONFIG``.
- ``profile_cmd``, ``profile_log``: ``rlsim profile`` from real loop runs, or ``--from-log`` from a framework's log.
- ``plan_cmd``: ``rlsim plan CLUSTER.yaml`` and ``rlsim plan validate``; ``plan_gpu``: ``rlsim plan`` on a
  ``kind: gpu-step`` YAML (the datasheet-based GPU step model).

Each ``*_cmd`` module exposes ``add_arguments(parser)`` and ``run(args) -> int``; ``main`` lists the commands and
imports only the one being run.
"""
