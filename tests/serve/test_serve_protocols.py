"""OpenRLHF's ``/get_reward`` and vLLM's ``/classify`` + ``/v1/models`` on a real server on 127.0.0.1.

Answers are parsed with vLLM's own pydantic response classes (the installed vLLM), and the keys we
send are checked against theirs, so a renamed or missing field fails here. Rewards must equal what
``/score`` gives for the same texts (``test-tiny``: mean token id / 1000, exact over HTTP).
"""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.serve_helpers import WAIT


# vLLM's protocol modules import vLLM itself (about 10 s here): fixtures, so only the tests that read them pay it, and
# only in the worker that runs them, not in every worker collecting this file.
@pytest.fixture(scope="module")
def vllm_classify():
    return pytest.importorskip("vllm.entrypoints.pooling.classify.protocol")


@pytest.fixture(scope="module")
def vllm_engine():
    return pytest.importorskip("vllm.entrypoints.serve.engine.protocol")


TEXTS = ["a short text", "another one, a little longer than the first", "word " * 60]  # the last is truncated
MODEL = "tiny-test"  # the conftest server's --model


def score(client, texts: list[str]) -> list[float]:
    r = client.post("/score", json={"texts": texts})
    assert r.status_code == 200, r.text
    return r.json()["rewards"]


def test_openrlhf_payload_gets_the_rewards_score_gives(start_server) -> None:
    srv = start_server()
    # Exactly what OpenRLHF's remote reward client posts: query = prompt + response, plus prompts and labels.
    payload = {"query": TEXTS, "prompts": ["a", "another", "word"], "labels": ["x", None, "z"]}
    with srv.client() as client:
        r = client.post("/get_reward", json=payload)
        expected = score(client, TEXTS)
        bare = client.post("/get_reward", json={"query": TEXTS[:1]})  # the older client sends query only
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"rewards", "scores", "extra_logs"}
    assert body["rewards"] == expected and body["scores"] == expected and body["extra_logs"] == {}
    assert bare.json()["rewards"] == expected[:1]


def test_classify_parses_into_vllms_response_and_matches_score(
    start_server, tiny_scorer_factory, vllm_classify
) -> None:
    srv = start_server()
    direct = tiny_scorer_factory()
    with srv.client() as client:
        many = client.post("/classify", json={"model": MODEL, "input": TEXTS})
        one = client.post("/classify", json={"input": TEXTS[0], "use_activation": True, "priority": 0})
        expected = score(client, TEXTS)
    assert many.status_code == 200, many.text
    parsed = vllm_classify.ClassificationResponse.model_validate(many.json())
    assert parsed.model == MODEL and parsed.object == "list"
    assert [d.index for d in parsed.data] == [0, 1, 2]
    assert [d.probs for d in parsed.data] == [[r] for r in expected]
    assert all(d.num_classes == 1 for d in parsed.data)
    # usage counts the tokens read after truncation (max_length 32), as vLLM's prompt_tokens does.
    tokens = sum(min(n, 32) for n in direct.token_lengths(TEXTS))
    assert parsed.usage.prompt_tokens == parsed.usage.total_tokens == tokens
    _same_keys(many.json(), vllm_classify.ClassificationResponse)
    _same_keys(many.json()["data"][0], vllm_classify.ClassificationData)
    assert one.json()["data"][0]["probs"] == pytest.approx([1 / (1 + math.exp(-expected[0]))], rel=1e-12)


def test_classify_token_rows_score_like_texts(start_server) -> None:
    srv = start_server()
    tok = srv.scorer._tokenizer
    rows = [tok(t)["input_ids"] for t in TEXTS[:2]]
    with srv.client() as client:
        by_rows = client.post("/classify", json={"input": rows}).json()
        by_row = client.post("/classify", json={"input": rows[0]}).json()
        expected = score(client, TEXTS[:2])
    assert [d["probs"][0] for d in by_rows["data"]] == expected
    assert by_row["data"][0]["probs"] == [expected[0]]
    assert by_rows["usage"]["prompt_tokens"] == len(rows[0]) + len(rows[1])


def test_models_lists_the_served_model_as_vllm_does(start_server, vllm_engine) -> None:
    srv = start_server()
    with srv.client() as client:
        r = client.get("/v1/models")
    parsed = vllm_engine.ModelList.model_validate(r.json())
    assert [m.id for m in parsed.data] == [MODEL]
    assert parsed.data[0].max_model_len == 32
    _same_keys(r.json()["data"][0], vllm_engine.ModelCard)


@pytest.mark.parametrize(
    "path, body, status, words",
    [
        ("/classify", {"model": "gpt-4", "input": "x"}, 404, "model: the model `gpt-4` does not exist"),
        ("/classify", {"model": 7, "input": "x"}, 422, "body.model"),
        ("/classify", {"input": []}, 422, "input is an empty list"),
        ("/classify", {"input": [[1], []]}, 422, "empty token-id row"),
        ("/classify", {"input": [1, "a"]}, 422, "body.input"),
        ("/classify", {"input": "x", "use_activation": "yes"}, 422, "body.use_activation"),
        ("/classify", {"model": MODEL}, 422, "body.input: Field required"),
        ("/classify", {"input": ["x"] * 5}, 413, "limit is 4"),
        ("/classify", {"input": [[5, 30522]]}, 422, "outside the vocabulary"),
        ("/get_reward", {"query": []}, 422, "body.query"),
        ("/get_reward", {"query": "one text"}, 422, "body.query"),
        ("/get_reward", {"query": ["a", 3]}, 422, "body.query.1"),
        ("/get_reward", {"query": ["a"], "prompts": ["a", "b"]}, 422, "prompts has 2 entries but query has 1"),
        ("/get_reward", {"prompts": ["a"]}, 422, "body.query: Field required"),
        ("/get_reward", {"query": ["x" * 101]}, 413, "max_text_chars"),
        ("/get_reward", {"query": ["\ud800"]}, 422, "query 0 holds an unpaired surrogate"),
    ],
)
def test_bad_protocol_requests_get_4xx_naming_the_field(start_server, path, body, status, words) -> None:
    srv = start_server(max_texts=4, max_text_chars=100, max_queue=8, max_batch_size=4)
    with srv.client() as client:
        # json.dumps escapes a lone surrogate as "\\ud800", as a sloppy client would send it
        r = client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    assert words in r.json()["detail"]


def test_protocols_share_the_batcher_backpressure_and_metrics(start_server) -> None:
    srv = start_server(max_texts=3, max_batch_size=4, max_queue=4, max_wait_s=0.0, sub_batch_size=0)
    srv.scorer.gate.clear()
    with ThreadPoolExecutor(3) as pool, srv.client() as client:
        held = pool.submit(client.post, "/get_reward", json={"query": ["held"]})
        assert srv.scorer.entered.wait(WAIT)
        queued = pool.submit(client.post, "/classify", json={"input": ["q1", "q2", "q3"]})
        _wait(lambda: srv.state.backend.queued_sequences == 3)
        full = client.post("/get_reward", json={"query": ["p", "q"]})
        srv.scorer.gate.set()
        assert held.result(WAIT).status_code == 200 and queued.result(WAIT).status_code == 200
        client.get("/v1/models")
        metrics = client.get("/metrics").text
    assert full.status_code == 503 and "Retry-After" in full.headers
    assert [len(b) for b in srv.scorer.batches] == [1, 3]
    counts = {
        (s.labels["endpoint"], s.labels["status"]): s.value
        for f in text_string_to_metric_families(metrics)
        for s in f.samples
        if s.name == "rlsim_serve_requests_total"
    }
    assert counts[("/get_reward", "200")] == 1 and counts[("/get_reward", "503")] == 1
    assert counts[("/classify", "200")] == 1 and counts[("/v1/models", "200")] == 1


def _same_keys(ours: dict, vllm_class) -> None:
    names = set(vllm_class.model_fields)
    assert set(ours) == names, f"ours has {sorted(set(ours) - names)} extra, lacks {sorted(names - set(ours))}"


def _wait(predicate) -> None:
    import time

    end = time.monotonic() + WAIT
    while not predicate():
        assert time.monotonic() < end
        time.sleep(0.01)
