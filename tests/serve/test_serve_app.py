"""The scoring server over real HTTP on 127.0.0.1: results, batching, back-pressure, timeouts, limits.

The ``test-tiny`` runtime's reward is the mean token id of a row / 1000, independent of padding and
batch company, so served rewards must equal direct ones exactly. Requests are held in the model
with the scorer's ``gate`` to make queue states deterministic; no timing is asserted.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from rlsim.errors import RlsimError
from rlsim.scoring.base import ScorerSettings
from rlsim.serve.settings import ServeSettings
from tests.helpers.serve_helpers import WAIT, backend_factory
from tests.helpers.tiny_scorer import TextOnlyScorer, tiny_spec


def wait_until(predicate, what: str) -> None:
    import time

    end = time.monotonic() + WAIT
    while not predicate():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.01)


def post(client: httpx.Client, body: object) -> httpx.Response:
    return client.post("/score", json=body)


def test_served_rewards_equal_direct_scoring_for_concurrent_clients(start_server, tiny_scorer_factory) -> None:
    srv = start_server(max_batch_size=8, max_wait_s=0.005)
    direct = tiny_scorer_factory()
    requests = [[f"client {c} text {i} " + "word " * (i * 3 + c) for i in range(1 + c % 4)] for c in range(24)]

    def send(texts: list[str]) -> dict:
        with srv.client() as client:
            r = post(client, {"texts": texts})
            assert r.status_code == 200, r.text
            return r.json()

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, requests))
    for texts, answer in zip(requests, answers, strict=True):
        assert answer["rewards"] == direct.score_batch(texts).tolist()
        assert answer["truncated"] == sum(n > direct.max_length for n in direct.token_lengths(texts))
    assert any(answer["truncated"] for answer in answers) and not all(answer["truncated"] for answer in answers)


def test_requests_queued_together_share_one_forward_pass(start_server) -> None:
    srv = start_server(max_batch_size=64, max_wait_s=0.001, sub_batch_size=0)
    srv.scorer.gate.clear()
    with ThreadPoolExecutor(6) as pool, srv.client() as client:
        first = pool.submit(post, client, {"texts": ["first"]})
        wait_until(srv.scorer.entered.is_set, "the first batch to reach the model")
        rest = [pool.submit(post, client, {"texts": [f"t{i}", f"u{i}"]}) for i in range(5)]
        wait_until(lambda: srv.state.backend.queued_requests == 5, "five queued requests")
        srv.scorer.gate.set()
        assert all(f.result(WAIT).status_code == 200 for f in [first, *rest])
    # One batch for the first request, then one for the five queued behind it (10 texts).
    assert [len(b) for b in srv.scorer.batches] == [1, 10]


def test_a_shared_batch_is_scored_in_length_sorted_sub_batches(start_server) -> None:
    srv = start_server(max_batch_size=64, max_wait_s=0.001, sub_batch_size=4)
    srv.scorer.gate.clear()
    texts = [[" ".join(["word"] * n), f"x{n}"] for n in (9, 1, 5, 3, 7)]  # mixed lengths, 10 texts in all
    with ThreadPoolExecutor(6) as pool, srv.client() as client:
        first = pool.submit(post, client, {"texts": ["first"]})
        wait_until(srv.scorer.entered.is_set, "the first batch to reach the model")
        rest = [pool.submit(post, client, {"texts": t}) for t in texts]
        wait_until(lambda: srv.state.backend.queued_requests == 5, "five queued requests")
        srv.scorer.gate.set()
        answers = [f.result(WAIT).json() for f in rest]
        assert first.result(WAIT).status_code == 200
    # The 10 queued texts went through the model in passes of at most 4, shortest first ...
    assert [len(b) for b in srv.scorer.batches] == [1, 4, 4, 2]
    flat = [t for pair in texts for t in pair]
    lengths = srv.scorer.token_lengths(flat)
    passes = srv.scorer.padded_lengths[1:]
    assert passes == sorted(passes) and passes[-1] == max(lengths)
    # ... and every request still got its own rewards, in its own order.
    direct = srv.scorer
    for pair, answer in zip(texts, answers, strict=True):
        assert answer["rewards"] == direct.score_batch(pair).tolist()


def test_full_queue_answers_503_with_retry_after_and_accepted_requests_complete(start_server) -> None:
    srv = start_server(max_batch_size=2, max_queue=4, max_texts=2, max_wait_s=0.0)
    srv.scorer.gate.clear()
    with ThreadPoolExecutor(4) as pool, srv.client() as client:
        held = pool.submit(post, client, {"texts": ["held in the model"]})
        wait_until(srv.scorer.entered.is_set, "a batch in the model")
        queued = [pool.submit(post, client, {"texts": [f"q{i}a", f"q{i}b"]}) for i in range(2)]
        wait_until(lambda: srv.state.backend.queued_sequences == 4, "a full queue")
        rejected = post(client, {"texts": ["one too many"]})
        assert rejected.status_code == 503
        assert int(rejected.headers["retry-after"]) >= 1
        assert "full" in rejected.json()["detail"]
        srv.scorer.gate.set()
        assert [f.result(WAIT).status_code for f in [held, *queued]] == [200, 200, 200]
        assert post(client, {"texts": ["after the rush"]}).status_code == 200


def test_work_that_would_outlast_the_timeout_is_refused_at_once(start_server, tiny_scorer_factory) -> None:
    scorer = tiny_scorer_factory()
    scorer.delay_s = 1.0  # every batch takes at least 1 s, so the server's estimate is >= 1 s per sequence
    srv = start_server(
        scorer=scorer, max_batch_size=1, max_wait_s=0.0, request_timeout_s=3.0, max_queue=64, max_texts=4
    )
    with ThreadPoolExecutor(12) as pool, srv.client() as client:
        assert post(client, {"texts": ["teaches the server its speed"]}).status_code == 200
        scorer.gate.clear()
        scorer.entered.clear()
        held = pool.submit(post, client, {"texts": ["held"]})
        wait_until(scorer.entered.is_set, "a batch in the model")
        later = [pool.submit(post, client, {"texts": [f"q{i}"]}) for i in range(10)]
        answered = lambda: [f.result() for f in later if f.done()]  # noqa: E731
        wait_until(lambda: len(answered()) + srv.state.backend.queued_requests == 10, "all ten answered or queued")
        # With >= 1 s per sequence and a 3 s timeout, a 4th queued sequence would wait > 3 s: refused.
        refused = [r for r in answered() if r.status_code == 503]
        assert len(refused) >= 7
        assert all("estimated wait" in r.json()["detail"] and int(r.headers["retry-after"]) >= 1 for r in refused)
        scorer.gate.set()
        assert {f.result(WAIT).status_code for f in [held, *later]} <= {200, 503, 504}


def test_request_not_scored_in_time_gets_504_and_is_never_run(start_server) -> None:
    srv = start_server(request_timeout_s=0.2, max_wait_s=0.0)
    srv.scorer.gate.clear()
    with ThreadPoolExecutor(2) as pool, srv.client() as client:
        held = pool.submit(post, client, {"texts": ["held"]})
        wait_until(srv.scorer.entered.is_set, "a batch in the model")
        late = post(client, {"texts": ["zebra"]})
        assert late.status_code == 504
        assert "not scored within 0.2 s" in late.json()["detail"]
        srv.scorer.gate.set()
        assert held.result(WAIT).status_code == 504  # it, too, outlived the timeout while held
        assert post(client, {"texts": ["fine again"]}).status_code == 200
    zebra = srv.scorer._tokenizer("zebra", add_special_tokens=False)["input_ids"][0]
    assert all(zebra not in batch for batch in srv.scorer.batches), "a timed-out queued request still ran"


def test_health_is_503_while_loading_then_ready(start_server, tiny_scorer_factory) -> None:
    release = threading.Event()
    settings = ServeSettings(port=0, warmup=True)

    def slow_factory(metrics):
        assert release.wait(WAIT)
        return backend_factory(tiny_scorer_factory(), settings)(metrics)

    srv = start_server(factory=slow_factory, wait=False, warmup=True)
    with srv.client() as client:
        wait_until(lambda: _health(client) is not None, "the server to listen")
        loading = client.get("/health")
        assert loading.status_code == 503 and loading.json()["status"] == "loading"
        assert post(client, {"texts": ["too early"]}).status_code == 503
        release.set()
        wait_until(lambda: _health(client) == 200, "ready")
        body = client.get("/health").json()
        assert body["status"] == "ready" and body["warmup_s"] > 0


def _health(client: httpx.Client) -> int | None:
    try:
        return client.get("/health").status_code
    except httpx.TransportError:
        return None


def test_a_model_that_fails_to_load_is_reported_and_stops_the_server(start_server) -> None:
    def broken(metrics):
        raise RlsimError("weights file missing; re-export the model")

    srv = start_server(factory=broken, wait=False)
    srv.thread.join(WAIT)
    assert not srv.thread.is_alive(), "the server kept running without a model"
    assert srv.state.status == "failed"
    assert "weights file missing" in srv.state.health()["detail"]


def test_token_ids_score_like_the_same_text_and_count_truncation(start_server, tiny_scorer_factory) -> None:
    srv = start_server()
    tok = srv.scorer._tokenizer
    texts = ["a short text", "another one, a little longer than the first"]
    rows = [tok(t)["input_ids"] for t in texts]
    long_row = [101] + list(range(1000, 1100)) + [102]  # 102 ids, max_length 32: cut, end kept
    with srv.client() as client:
        by_text = post(client, {"texts": texts}).json()
        by_ids = post(client, {"token_ids": rows}).json()
        long = post(client, {"token_ids": [long_row]}).json()
    assert by_ids == by_text
    assert long["truncated"] == 1
    kept = np.asarray([long_row[-32:]])
    assert long["rewards"] == pytest.approx([float(kept.mean() / 1000.0)], rel=1e-6)


def test_truncation_is_counted_per_request_within_a_shared_batch(start_server) -> None:
    srv = start_server(max_batch_size=64, max_wait_s=0.001)
    srv.scorer.gate.clear()
    long_text = "word " * 200  # far past max_length 32
    with ThreadPoolExecutor(3) as pool, srv.client() as client:
        first = pool.submit(post, client, {"texts": ["first"]})
        wait_until(srv.scorer.entered.is_set, "a batch in the model")
        cut = pool.submit(post, client, {"texts": [long_text, "short", long_text]})
        whole = pool.submit(post, client, {"texts": ["short too"]})
        wait_until(lambda: srv.state.backend.queued_requests == 2, "two queued requests")
        srv.scorer.gate.set()
        assert first.result(WAIT).json()["truncated"] == 0
        assert cut.result(WAIT).json()["truncated"] == 2
        assert whole.result(WAIT).json()["truncated"] == 0
    assert [len(b) for b in srv.scorer.batches] == [1, 4]


@pytest.mark.parametrize(
    "body, status, words",
    [
        ({"texts": ["x"] * 5}, 413, "limit is 4"),
        ({"texts": ["x" * 101]}, 413, "max_text_chars"),
        ({"token_ids": [[1] * 65]}, 413, "max_row_tokens"),
        ({"texts": ["a"], "token_ids": [[1]]}, 422, "exactly one"),
        ({}, 422, "exactly one"),
        ({"token_ids": [[]]}, 422, "empty"),
        ({"token_ids": [[5, -3]]}, 422, "outside the vocabulary"),
        ({"token_ids": [[30522]]}, 422, "outside the vocabulary"),
        ({"token_ids": [[10**40]]}, 422, "41-digit"),
        ({"texts": "not a list"}, 422, "valid list"),
        ({"texts": [1, 2]}, 422, "valid string"),
        ({"token_ids": [[1.5]]}, 422, "valid integer"),
        ({"texts": ["a"], "extra": 1}, 422, "extra"),
    ],
)
def test_bad_requests_get_4xx_with_a_message(start_server, body, status, words) -> None:
    srv = _limits_server(start_server)
    with srv.client() as client:
        r = post(client, body)
    assert r.status_code == status, r.text
    assert words in r.json()["detail"]


def _limits_server(start_server):
    return start_server(max_texts=4, max_text_chars=100, max_row_tokens=64, max_queue=8, max_batch_size=4)


def test_oversized_bodies_get_413_with_and_without_content_length(start_server) -> None:
    srv = start_server(max_body_bytes=1000)
    big = b'{"texts": ["' + b"x" * 2000 + b'"]}'
    with srv.client() as client:
        declared = client.post("/score", content=big, headers={"content-type": "application/json"})
        json_type = {"content-type": "application/json"}
        chunked = client.post("/score", content=iter([big[:600], big[600:]]), headers=json_type)
        ok = post(client, {"texts": ["small"]})
    assert declared.status_code == 413 and chunked.status_code == 413
    assert "larger than 1000 bytes" in chunked.json()["detail"]
    assert ok.status_code == 200


def test_token_ids_to_a_text_only_runtime_get_422(start_server) -> None:
    srv = start_server(scorer=TextOnlyScorer(tiny_spec(), ScorerSettings()))
    with srv.client() as client:
        texts = post(client, {"texts": ["abcd"]})
        ids = post(client, {"token_ids": [[1, 2]]})
    assert texts.json()["rewards"] == [pytest.approx(0.04)]
    assert ids.status_code == 422 and "texts only" in ids.json()["detail"]


def test_empty_request_scores_to_empty(start_server) -> None:
    srv = start_server()
    with srv.client() as client:
        assert post(client, {"texts": []}).json() == {"rewards": [], "truncated": 0}
        assert post(client, {"texts": [""]}).status_code == 200
