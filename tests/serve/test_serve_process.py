"""``rlsim serve`` as a real process: signals finish accepted requests, failures exit with a message."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rlsim.scoring.base import register_scorer
from rlsim.scoring.tokenizing import EncodedBatch
from tests.helpers.serve_helpers import TLS, WAIT, process_url, serve_process, terminate, wait_ready
from tests.helpers.tiny_scorer import TinyScorer


@register_scorer("test-file-gated")
class FileGatedScorer(TinyScorer):
    """``test-tiny`` whose every batch waits until the file ``$RLSIM_TEST_GATE`` exists, and says it is
    waiting by creating ``$RLSIM_TEST_GATE.entered``.

    The server runs in another process, so a ``threading.Event`` cannot hold it: a file can. The
    server imports this module (``--import tests.serve.test_serve_process``) to find the runtime.
    """

    name = "test-file-gated"

    def _forward(self, batch: EncodedBatch) -> np.ndarray:
        gate, end = Path(os.environ["RLSIM_TEST_GATE"]), time.monotonic() + WAIT
        Path(f"{gate}.entered").touch()
        while not gate.exists():
            if time.monotonic() > end:
                raise RuntimeError("test gate never opened")
            time.sleep(0.01)
        return super()._forward(batch)


def queued_requests(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=WAIT, verify=TLS).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "rlsim_serve_queue_depth_requests":
                return sample.value
    raise AssertionError("queue depth gauge missing")


def wait_until_not_listening(url: str) -> None:
    """Return once the server refuses new connections: it has taken the signal and is shutting down."""
    end = time.monotonic() + WAIT
    while True:
        try:
            httpx.get(f"{url}/health", timeout=5, verify=TLS)
        except httpx.TransportError:
            return
        assert time.monotonic() < end, "the server kept accepting connections after the signal"
        time.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.slow  # starts an rlsim serve process with a real model (~4-5 s each)
def test_signal_finishes_every_accepted_request(tmp_path: Path, sig: signal.Signals) -> None:
    # The model is held shut by a gate file until the server has taken the signal, so "four
    # requests accepted, one in the model and three queued, when the signal lands" holds however
    # slowly the client threads start; then the gate opens and all four must still be answered.
    port_file, gate = tmp_path / "port", tmp_path / "gate"
    proc = serve_process(
        "--import", "tests.serve.test_serve_process", "--runtime", "test-file-gated", "--model", "minilm-rm",
        "--max-batch-size", "1", "--max-wait-ms", "0", "--no-warmup",
        env={"RLSIM_TEST_GATE": str(gate)}, port_file=port_file,
    )  # fmt: skip
    try:
        url = process_url(proc, port_file)
        wait_ready(url)
        with ThreadPoolExecutor(4) as pool:
            bodies = [{"texts": [f"text {i}"]} for i in range(4)]
            futures = [pool.submit(httpx.post, f"{url}/score", json=body, timeout=WAIT) for body in bodies]
            end = time.monotonic() + WAIT
            # One held in the model, three waiting behind it. Both are read: three queued alone could be three
            # requests that the batcher has not yet started, with the fourth still connecting (seen under load:
            # the signal then closed the socket on it).
            entered = Path(f"{gate}.entered")
            while not entered.exists() or queued_requests(url) < 3:
                assert time.monotonic() < end, "requests never queued"
                time.sleep(0.02)
            proc.send_signal(sig)
            wait_until_not_listening(url)
            assert not any(f.done() for f in futures)  # all four were still in flight at the signal
            gate.touch()
            answers = [f.result(WAIT) for f in futures]
        assert [a.status_code for a in answers] == [200] * 4
        assert all(len(a.json()["rewards"]) == 1 for a in answers)
        assert proc.wait(WAIT) == 0  # a requested stop is a clean exit, not death by signal
        stderr = proc.stderr.read().decode()
        assert "Traceback" not in stderr and f"stopped by {sig.name}" in stderr, stderr
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}/health", timeout=5, verify=TLS)
    finally:
        gate.touch()
        terminate(proc)


def run_serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    proc = serve_process(*args, port_file=tmp_path / "port")
    try:
        _, err = proc.communicate(timeout=WAIT)
    finally:
        terminate(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, b"", err)


def test_unknown_runtime_exits_2_listing_valid_names(tmp_path: Path) -> None:
    done = run_serve(tmp_path, "--runtime", "nope")
    assert done.returncode == 2
    message = done.stderr.decode()
    assert "unknown scoring runtime 'nope'" in message and "eager" in message and "Traceback" not in message


def test_model_that_fails_to_load_exits_2_with_the_reason(tmp_path: Path) -> None:
    done = run_serve(tmp_path, "--runtime", "test-broken", "--model", "minilm-rm")
    assert done.returncode == 2
    assert "cannot load on purpose" in done.stderr.decode()


def test_port_in_use_exits_2_naming_the_fix(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = run_serve(tmp_path, "--runtime", "test-tiny", "--port", str(taken.getsockname()[1]))
    assert done.returncode == 2
    assert "cannot listen on 127.0.0.1" in done.stderr.decode() and "--port" in done.stderr.decode()


@pytest.mark.slow  # starts an rlsim serve process with a real model (~4-5 s each)
def test_server_exits_when_the_process_it_serves_dies(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    port_file = tmp_path / "port"
    proc = serve_process(
        "--runtime", "test-tiny", "--model", "minilm-rm", "--parent-pid", str(parent.pid), port_file=port_file
    )
    try:
        wait_ready(process_url(proc, port_file))
        parent.kill()
        parent.wait()
        proc.wait(WAIT)  # raises TimeoutExpired if the server never noticed
        assert "parent process" in proc.stderr.read().decode()
    finally:
        parent.kill()
        terminate(proc)
