"""What the machine can compute: model FLOP counts and the measured GEMM rates they are judged against.

- ``flops``: forward-pass FLOPs of a reward model (real tokens, padding excluded);
- ``gemm``: matrix-product rates per number format and library (torch, ONNX Runtime's MLAS);
- ``peaks``: each precision's peak rate (or why this machine has none) and the fraction a pass achieves of it;
- ``cpu``: the CPU's feature flags, and the ones that give native bf16 matrix products.

A leaf: it imports nothing of rlsim but ``rlsim.registry``, so the machine fingerprint, the benchmarks, the
metrics and the scoring runtimes can all read it (``tests/test_import_rules.py``).
"""
