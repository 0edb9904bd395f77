"""Benchmarks run from the CLI (``rlsim bench ...``): measured in fresh processes, reported with CIs.

``scoring``: runtimes x batchers x batch sizes on a workload (``rlsim.bench.scoring_runner``);
``flops``/``gemm``: the model FLOP estimate and the machine's GEMM rate that throughput is judged by.
"""
