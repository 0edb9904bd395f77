"""rlsim: simulated RLHF steps that measure how reward scoring and rollout generation share machines.

Importing the package is cheap: heavy backends (torch, vLLM, ONNX Runtime, Ray, the native engine)
are imported inside the code that needs them.
"""


def __getattr__(name: str) -> str:
    """``rlsim.__version__``, read from the installed package's metadata: pyproject.toml holds the one version.

    Read on first use because importlib.metadata costs about 40 ms, several times the rest of ``import rlsim``.
    """
    if name != "__version__":
        raise AttributeError(f"module 'rlsim' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("rlsim")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found
