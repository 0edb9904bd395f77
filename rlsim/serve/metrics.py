"""The server's Prometheus metrics (text exposition format at ``GET /metrics``).

A private ``CollectorRegistry`` per server, so several servers in one process (tests) never share
counts. Names follow Prometheus conventions: ``_total`` counters, ``_seconds`` units.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Endpoints get their own label value; anything else (typos, fuzzing) shares "other", so a scan of
# random paths cannot grow the number of series without bound.
ENDPOINTS = ("/score", "/health", "/metrics", "/get_reward", "/classify", "/v1/models")
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServerMetrics:
    """Requests by status, queue depth, batch sizes, latency. Safe to update from any thread."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "rlsim_serve_requests",
            "HTTP requests answered, by endpoint and status code",
            ["endpoint", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "rlsim_serve_request_latency_seconds",
            "Time from request arrival to response sent, seconds",
            ["endpoint"],
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.batch_size = Histogram(
            "rlsim_serve_batch_size_sequences",
            "Sequences per dynamic batch (scored in length-sorted passes)",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.batch_seconds = Histogram(
            "rlsim_serve_batch_seconds",
            "Time per dynamic batch incl. tokenisation, seconds",
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.queue_sequences = Gauge("rlsim_serve_queue_depth_sequences", "Sequences waiting to be batched", registry=r)
        self.queue_requests = Gauge("rlsim_serve_queue_depth_requests", "Requests waiting to be batched", registry=r)
        self.sequences = Counter("rlsim_serve_sequences", "Sequences scored", registry=r)
        self.truncated = Counter("rlsim_serve_truncated", "Sequences cut to the model's length limit", registry=r)
        self.ready = Gauge("rlsim_serve_ready", "1 once the model is loaded and warmed up", registry=r)

    def watch_queue(self, sequences: Callable[[], float], requests: Callable[[], float]) -> None:
        """Read queue depth at scrape time rather than tracking every enqueue and dequeue."""
        self.queue_sequences.set_function(sequences)
        self.queue_requests.set_function(requests)

    def observe_batch(self, sequences: int, seconds: float) -> None:
        self.batch_size.observe(sequences)
        self.batch_seconds.observe(seconds)

    def observe_request(self, path: str, status: int, seconds: float) -> None:
        endpoint = path if path in ENDPOINTS else "other"
        self.requests.labels(endpoint=endpoint, status=str(status)).inc()
        self.latency.labels(endpoint=endpoint).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
