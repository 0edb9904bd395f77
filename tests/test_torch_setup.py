"""prepare_torch: the device check, threads and seed every torch role shares."""

from __future__ import annotations

import pytest

from rlsim.errors import RlsimError
from rlsim.torch_setup import prepare_torch

torch = pytest.importorskip("torch")


def test_cpu_device_threads_and_seed_are_set() -> None:
    threads = torch.get_num_threads()
    try:
        device = prepare_torch("cpu", "trainer.device", threads=1, seed=123)
        assert device == torch.device("cpu") and torch.get_num_threads() == 1
        first = torch.rand(3)
        prepare_torch("cpu", "trainer.device", seed=123)
        assert torch.equal(first, torch.rand(3))  # the same seed gives the same draws
    finally:
        torch.set_num_threads(threads)


def test_no_threads_leaves_torch_alone() -> None:
    threads = torch.get_num_threads()
    prepare_torch("cpu", "policy.device", threads=None)
    assert torch.get_num_threads() == threads


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_missing_cuda_names_the_setting_and_the_fix() -> None:
    with pytest.raises(RlsimError, match=r"policy\.device is cuda .* set it to cpu"):
        prepare_torch("cuda", "policy.device")
