"""``GET /metrics`` is valid Prometheus text and its counts match what the server did."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.serve_helpers import WAIT


def scrape(client) -> dict[str, list]:
    r = client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    return {f.name: f.samples for f in text_string_to_metric_families(r.text)}


def value(samples: list, name: str, **labels: str) -> float:
    found = [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, f"{name}{labels}: {found}"
    return found[0]


def test_metrics_parse_and_count_requests_batches_and_queue(start_server) -> None:
    srv = start_server(max_texts=3, max_batch_size=4, max_queue=4, max_wait_s=0.0)
    with srv.client() as client:
        for texts in (["a"], ["b", "c"], ["d", "e", "f"]):
            assert client.post("/score", json={"texts": texts}).status_code == 200
        assert client.post("/score", json={"texts": ["x"] * 4}).status_code == 413
        assert client.post("/score", json={"texts": [7]}).status_code == 422
        client.get("/no-such-page")
        srv.scorer.gate.clear()
        srv.scorer.entered.clear()
        with ThreadPoolExecutor(3) as pool:
            held = pool.submit(client.post, "/score", json={"texts": ["held"]})
            assert srv.scorer.entered.wait(WAIT)
            queued = pool.submit(client.post, "/score", json={"texts": ["q1", "q2", "q3"]})
            _wait(lambda: srv.state.backend.queued_sequences == 3)
            during = scrape(client)
            assert client.post("/score", json={"texts": ["p", "q"]}).status_code == 503
            srv.scorer.gate.set()
            assert held.result(WAIT).status_code == 200 and queued.result(WAIT).status_code == 200
        after = scrape(client)

    assert value(during["rlsim_serve_queue_depth_sequences"], "rlsim_serve_queue_depth_sequences") == 3
    assert value(during["rlsim_serve_queue_depth_requests"], "rlsim_serve_queue_depth_requests") == 1
    requests = after["rlsim_serve_requests"]
    assert value(requests, "rlsim_serve_requests_total", endpoint="/score", status="200") == 5
    assert value(requests, "rlsim_serve_requests_total", endpoint="/score", status="413") == 1
    assert value(requests, "rlsim_serve_requests_total", endpoint="/score", status="422") == 1
    assert value(requests, "rlsim_serve_requests_total", endpoint="/score", status="503") == 1
    assert value(requests, "rlsim_serve_requests_total", endpoint="other", status="404") == 1
    batches = after["rlsim_serve_batch_size_sequences"]
    assert value(batches, "rlsim_serve_batch_size_sequences_count") == len(srv.scorer.batches) == 5
    assert value(batches, "rlsim_serve_batch_size_sequences_sum") == 1 + 2 + 3 + 1 + 3
    assert value(batches, "rlsim_serve_batch_size_sequences_bucket", le="1.0") == 2
    latency = after["rlsim_serve_request_latency_seconds"]
    assert value(latency, "rlsim_serve_request_latency_seconds_count", endpoint="/score") == 8
    assert value(after["rlsim_serve_sequences"], "rlsim_serve_sequences_total") == 10
    assert value(after["rlsim_serve_ready"], "rlsim_serve_ready") == 1
    assert value(after["rlsim_serve_queue_depth_sequences"], "rlsim_serve_queue_depth_sequences") == 0


def _wait(predicate) -> None:
    import time

    end = time.monotonic() + WAIT
    while not predicate():
        assert time.monotonic() < end
        time.sleep(0.01)
