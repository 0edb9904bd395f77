"""A real vLLM OpenAI server of the local tiny-llama-rm (LlamaForSequenceClassification, built with a fixed seed,
no download) in pooling/classify mode, started and supervised by the ``http`` runtime itself (``server_runtime:
vllm``, ``http_protocol: vllm-classify``, no url: ``rlsim.scoring.vllm_server``), scored through it, then used
at its url by ``rlsim bench scoring`` and ``rlsim run`` as an external server. Start-up takes 30-90 s on 2
cores.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import psutil
import pytest

from rlsim.scoring import make_scorer
from rlsim.scoring.base import ScorerSettings
from tests.helpers.installed import skip_module_unless_installed
from tests.helpers.tiny_run import tiny_hf_run

skip_module_unless_installed("vllm")
pytestmark = pytest.mark.slow
SERVED = ScorerSettings(server_runtime="vllm", http_protocol="vllm-classify", max_length=128, threads=1)


@pytest.fixture(scope="module")
def served(tiny_llama_rm) -> Iterator:
    scorer = make_scorer("http", tiny_llama_rm, SERVED)
    yield scorer
    scorer.close()


@pytest.fixture(scope="module")
def vllm_server(served) -> str:
    return str(served.url)


def test_http_runtime_starts_vllms_server_and_scores_with_it(served, tiny_llama_rm, texts) -> None:
    eager = make_scorer("eager", tiny_llama_rm, ScorerSettings(threads=1, max_length=128))
    try:
        assert served._served_model == "tiny-llama-rm" and served.server_pid is not None
        assert not served.server_exited()
        result, direct = served.score_batch(texts), eager.score_batch(texts)
        fits = np.array(served.token_lengths(texts)) <= 128
        assert 8 <= fits.sum() < len(texts)
        np.testing.assert_allclose(result[fits], direct[fits], atol=1e-4, rtol=0)
        # Longer texts are cut to their last 128 tokens by vLLM (truncate_prompt_tokens, left side), which drops
        # the leading special token that rlsim's own truncation keeps: close rewards, not the same ones.
        assert np.all(np.isfinite(result[~fits])) and not np.allclose(result[~fits], direct[~fits], atol=1e-4)
    finally:
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
                "--baseline",  # itself: no eager cell (two more worker processes) beside the runtime under test
                "http/fixed/8",
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


def test_closing_the_runtime_stops_the_server_and_its_engine(tiny_llama_rm, served) -> None:
    """Runs last in this module (it closes the module's server): the supervisor, vLLM's API server and its
    EngineCore are all gone once ``close()`` returns."""
    family = [served.server_pid, *(c.pid for c in psutil.Process(served.server_pid).children(recursive=True))]
    assert len(family) >= 3  # the supervisor, the API server, its EngineCore
    served.close()

    def alive() -> list[int]:
        return [p for p in family if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]

    deadline = time.monotonic() + 10  # a killed process takes a moment to be reaped
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive()
