"""The ``http`` runtime speaking OpenRLHF's and vLLM's reward protocols (``http_protocol``).

Against a real ``rlsim serve`` on 127.0.0.1 (which answers all three protocols): the rewards must be the
ones the in-process runtime gives for the same texts. The request the client sends for ``vllm-classify``
and the answers it reads are also checked with the installed vLLM's own pydantic classes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from rlsim.errors import ConfigError, RlsimError
from rlsim.scoring import http_scorer, make_scorer
from rlsim.scoring.base import ScorerSettings
from rlsim.scoring.http_protocols import PROTOCOLS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # starts an rlsim serve process with a real model, as tests/serve/test_serve_process.py's do
def test_every_protocol_gives_the_in_process_rewards(minilm, texts) -> None:
    eager = make_scorer("eager", minilm, ScorerSettings(threads=1, max_length=64))
    # This one starts its own server and speaks OpenRLHF's /get_reward to it; the others use its URL.
    own = make_scorer(
        "http", minilm, ScorerSettings(server_runtime="eager", threads=1, max_length=64, http_protocol="openrlhf")
    )
    clients = [
        make_scorer("http", minilm, ScorerSettings(url=own.url, http_protocol=p))  # type: ignore[attr-defined]
        for p in ("rlsim", "vllm-classify")
    ]
    try:
        direct = eager.score_batch(texts)
        for scorer in (own, *clients):
            np.testing.assert_allclose(scorer.score_batch(texts), direct, atol=1e-5, rtol=0)
        assert clients[1]._served_model == "minilm-rm"  # read from GET /v1/models
        assert clients[0].stats.truncated > 0 == own.stats.truncated  # only /score reports truncation
    finally:
        for scorer in (*clients, own, eager):
            scorer.close()
    assert not http_scorer._LIVE


def test_vllm_classify_request_and_response_match_vllms_own_classes() -> None:
    vllm_classify = pytest.importorskip("vllm.entrypoints.pooling.classify.protocol")
    engine = pytest.importorskip("vllm.entrypoints.serve.engine.protocol")
    wire = PROTOCOLS["vllm-classify"]
    body = wire.request(["a", "b"], "rm", max_length=64, truncation="left")
    request = vllm_classify.ClassificationCompletionRequest.model_validate(body)
    assert request.input == ["a", "b"] and request.model == "rm" and request.use_activation is False
    assert request.truncate_prompt_tokens == 64 and request.truncation_side == "left"
    answer = vllm_classify.ClassificationResponse(
        model="rm",
        usage=engine.UsageInfo(prompt_tokens=4, total_tokens=4),
        data=[
            vllm_classify.ClassificationData(index=i, label="LABEL_0", probs=[p], num_classes=1)
            for i, p in ((1, -0.5), (0, 2.25))
        ],
    ).model_dump(mode="json")
    assert wire.rewards(answer, 2, "http://x") == ([2.25, -0.5], 0)  # ordered by index, raw logits
    two_labels = {**answer, "data": [{**d, "probs": [0.1, 0.9], "num_classes": 2} for d in answer["data"]]}
    with pytest.raises(RlsimError, match="2-label classifier"):
        wire.rewards(two_labels, 2, "http://x")


class _Answers(BaseHTTPRequestHandler):
    body: bytes = b"{}"

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_POST  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_an_answer_in_another_protocol_is_refused_naming_it(minilm, stub, monkeypatch) -> None:
    # An OpenRLHF-shaped answer where vLLM's /classify answer is expected (and /v1/models lists a model).
    monkeypatch.setattr(_Answers, "body", json.dumps({"rewards": [1.0], "data": [{"id": "rm"}]}).encode())
    scorer = make_scorer("http", minilm, ScorerSettings(url=stub, http_protocol="vllm-classify"))
    try:
        with pytest.raises(RlsimError, match="not vllm-classify's.*--http-protocol"):
            scorer.score_batch(["a text"])
    finally:
        scorer.close()
    openrlhf = make_scorer("http", minilm, ScorerSettings(url=stub, http_protocol="openrlhf"))
    try:  # the right shape but the wrong count
        with pytest.raises(RlsimError, match="1 rewards for 2 texts"):
            openrlhf.score_batch(["a", "b"])
    finally:
        openrlhf.close()


def test_bad_protocol_settings_are_refused_at_load_time(tmp_path: Path) -> None:
    from rlsim.bench.scoring_worker import scorer_settings
    from rlsim.loop.config import load_run_config

    with pytest.raises(RlsimError, match="unknown protocol 'grpc'; valid: rlsim, openrlhf, vllm-classify"):
        ScorerSettings(http_protocol="grpc")  # type: ignore[arg-type]
    with pytest.raises(RlsimError, match="unknown protocol"):
        scorer_settings({"http_protocol": "grpc"})  # rlsim bench scoring's settings
    config = tmp_path / "run.yaml"
    config.write_text("reward: {runtime: eager, http_protocol: openrlhf, url: 'localhost:8000'}\n")
    with pytest.raises(ConfigError) as err:
        load_run_config(config, [])
    assert "reward.url" in str(err.value) and "not an http:// or https:// URL" in str(err.value)
    with pytest.raises(ConfigError, match="reward.http_protocol: applies to reward.runtime: http only"):
        load_run_config(config, ["reward.url=http://127.0.0.1:8000"])
    with pytest.raises(ConfigError, match="reward.http_protocol"):
        load_run_config(config, ["reward.runtime=http", "reward.http_protocol=grpc"])
    ok = load_run_config(config, ["reward.runtime=http", "reward.url=http://127.0.0.1:8000"])
    assert ok.reward.http_protocol == "openrlhf"
