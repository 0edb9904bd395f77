"""Benchmarks run from the CLI (``rlsim bench ...``): measured in fresh processes, reported with CIs.

``scoring``: runtimes x batchers x batch sizes on a workload (``rlsim.bench.scoring_runner``); throughput is
judged by the model's FLOPs and the machine's GEMM rates (``rlsim.hardware``), each runtime against its own
precision's peak (``runtime_precision``).
"""
