"""rlsim: simulated RLHF steps that measure how reward scoring and rollout generation share machines.

Importing the package is cheap: heavy backends (torch, vLLM, ONNX Runtime, Ray, the native engine)
are imported inside the code that needs them.
"""

__version__ = "0.1.0"
