"""One place that readies torch for a role: the device must exist, threads and seed are set.

Used by the eager/compile scorers, the Hugging Face generator and the trainer, which each run in
their own process (a Ray actor), so setting torch's process-wide threads and seed here is theirs
alone. torch is imported inside the function: ``import rlsim`` must stay light.
"""

from __future__ import annotations

from typing import Any

from rlsim.errors import RlsimError


def prepare_torch(device: str, setting: str, threads: int | None = None, seed: int | None = None) -> Any:
    """Return ``torch.device(device)`` after checking it exists; set intra-op ``threads`` and ``seed``
    when given. ``setting`` is the config field the device came from (named in the error)."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise RlsimError(
            f"{setting} is cuda but torch sees no CUDA GPU; set it to cpu (or run on a machine "
            "with a GPU and a CUDA build of torch)"
        )
    if threads:
        torch.set_num_threads(threads)
    if seed is not None:
        torch.manual_seed(seed)
    return torch.device(device)
