"""A remote reward's limits (``reward.http``): requests in flight, requests per minute, a per-attempt timeout,
retries with backoff, and ``on_timeout`` for a request still unanswered, against a real HTTP server on
loopback whose answers (slow, 429, ...) are scripted per request."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Iterator

import pytest

from rlsim.errors import ConfigError, RlsimError
from rlsim.scoring import make_scorer
from rlsim.scoring.base import ScorerSettings
from rlsim.scoring.remote_calls import Pacer, backoff_delay, requests_of
from tests.helpers.scripted_server import RewardServerHandler, read_json, scripted_server, send_json


# ---- the pieces ------------------------------------------------------------------------------------
def test_requests_of_splits_evenly_by_concurrency_or_by_size_within_the_servers_limit() -> None:
    rows = list(range(10))
    assert [len(p) for p in requests_of(rows, None, 3, 100)] == [3, 4, 3]
    assert [len(p) for p in requests_of(rows, None, 32, 100)] == [1] * 10
    assert [len(p) for p in requests_of(rows, 4, 3, 100)] == [4, 4, 2]
    assert [len(p) for p in requests_of(rows, None, 1, 4)] == [4, 4, 2]  # max_texts cuts further
    assert [x for p in requests_of(rows, 3, 2, 2) for x in p] == rows  # order kept
    assert requests_of([], 3, 2, 2) == []


def test_backoff_doubles_up_to_the_longest_and_honours_retry_after_within_it() -> None:
    assert [backoff_delay(k, (0.1, 1.0)) for k in range(5)] == [0.1, 0.2, 0.4, 0.8, 1.0]
    assert backoff_delay(0, (0.1, 1.0), retry_after_s=0.5) == 0.5
    assert backoff_delay(0, (0.1, 1.0), retry_after_s=30.0) == 1.0


def test_pacer_holds_requests_to_the_concurrency_and_spaces_their_starts() -> None:
    pacer = Pacer(concurrency=2, requests_per_minute=600)  # one start per 0.1 s
    lock = threading.Lock()
    inside, most, starts = 0, 0, []

    def call() -> None:
        nonlocal inside, most
        with pacer.slot():
            with lock:
                inside += 1
                most = max(most, inside)
                starts.append(time.monotonic())
            time.sleep(0.05)
            with lock:
                inside -= 1

    threads = [threading.Thread(target=call) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    starts.sort()
    assert most <= 2
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.09  # never two starts within 0.1 s
    assert pacer.waited_s > 0
    with pytest.raises(ValueError, match="concurrency >= 1"):
        Pacer(0, None)


# ---- against a scripted server -----------------------------------------------------------------------
class Server:
    """rlsim's protocol (GET /health, POST /score); reward = 1.0 per text. ``slow``: texts whose request sleeps
    ``sleep_s`` before answering; ``limited``: the first N posts get 429 with Retry-After 0."""

    def __init__(self) -> None:
        self.slow: set[str] = set()
        self.sleep_s = 2.0
        self.limited = 0
        self.posts: list[list[str]] = []
        self.inside = self.most_inside = 0
        self.lock = threading.Lock()


@pytest.fixture
def server() -> Iterator[tuple[str, Server]]:
    state = Server()

    class Handler(RewardServerHandler):
        def do_POST(self) -> None:
            texts = read_json(self)["texts"]
            with state.lock:
                state.posts.append(texts)
                limited = len(state.posts) <= state.limited
                state.inside += 1
                state.most_inside = max(state.most_inside, state.inside)
            if not limited:
                time.sleep(state.sleep_s if state.slow & set(texts) else 0.05)
            # Out before the answer leaves: once the client has it, it may send its next request at once, and a
            # count still holding this one would see the client over its limit when it is not.
            with state.lock:
                state.inside -= 1
            if limited:
                send_json(self, 429, {"detail": "rate limited"}, {"retry-after": "0"})
            else:
                send_json(self, 200, {"rewards": [1.0] * len(texts), "truncated": 0})

    with scripted_server(Handler) as url:
        yield url, state


def remote(minilm, url: str, **options: object):
    return make_scorer("http", minilm, ScorerSettings(url=url, http_deadline_s=30, options=options))


def test_a_batch_goes_out_as_concurrent_requests_up_to_the_limit(minilm, server) -> None:
    url, state = server
    scorer = remote(minilm, url, concurrency=3, request_size=1)
    try:
        rewards = scorer.score_batch([f"t{i}" for i in range(9)])
    finally:
        scorer.close()
    assert rewards.tolist() == [1.0] * 9
    assert len(state.posts) == 9 and all(len(p) == 1 for p in state.posts)
    assert 1 < state.most_inside <= 3
    assert scorer.take_outcomes() == {}


def test_a_request_past_its_timeout_is_retried_then_gets_the_default_and_is_counted(minilm, server) -> None:
    url, state = server
    state.slow = {"slow"}
    scorer = remote(minilm, url, timeout_s=0.3, retries=1, backoff_s=(0.05, 0.05), on_timeout="default",
                    default_reward=-1.0, request_size=2)  # fmt: skip
    try:
        rewards = scorer.score_batch(["a", "b", "slow", "c"])  # requests ["a", "b"] and ["slow", "c"]
        outcomes = scorer.take_outcomes()
    finally:
        scorer.close()
    assert rewards.tolist() == [1.0, 1.0, -1.0, -1.0]
    assert outcomes == {"timeouts": 2, "retries": 1}  # two rows stood in for; one retry of their request
    assert sum("slow" in p for p in state.posts) == 2  # the first attempt and one retry


def test_drop_gives_nan_and_counts_it_and_fail_names_the_setting(minilm, server) -> None:
    url, state = server
    state.slow = {"slow"}
    scorer = remote(minilm, url, timeout_s=0.3, retries=0, on_timeout="drop", request_size=1)
    try:
        rewards = scorer.score_batch(["a", "slow"])
        assert rewards[0] == 1.0 and math.isnan(rewards[1])
        assert scorer.take_outcomes() == {"timeouts": 1, "dropped": 1}
    finally:
        scorer.close()
    scorer = remote(minilm, url, timeout_s=0.3, retries=0)  # on_timeout: fail, the default
    try:
        with pytest.raises(RlsimError, match=r"after 1 attempts \(reward.http.retries: 0.*ReadTimeout.*reward.http"):
            scorer.score_batch(["slow"])
    finally:
        scorer.close()


def test_429_is_retried_after_the_servers_wait(minilm, server) -> None:
    url, state = server
    state.limited = 2
    scorer = remote(minilm, url, retries=3, backoff_s=(0.01, 0.05))
    try:
        assert scorer.score_batch(["a"]).tolist() == [1.0]
        assert scorer.take_outcomes() == {"retries": 2}
    finally:
        scorer.close()
    assert len(state.posts) == 3


@pytest.mark.parametrize(
    "reward, where",
    [
        ({"runtime": "http", "http": {"timeout_s": 0}}, "http.timeout_s"),
        ({"runtime": "http", "http": {"concurrency": 0}}, "http.concurrency"),
        ({"runtime": "http", "http": {"requests_per_minute": -5}}, "http.requests_per_minute"),
        ({"runtime": "http", "http": {"backoff_s": [2, 1]}}, "first <= longest"),
        ({"runtime": "http", "on_timeout": "skip"}, "on_timeout: Input should be 'default', 'drop' or 'fail'"),
        ({"runtime": "http", "http": {"on_timeout": "later"}}, "http.on_timeout"),
        ({"runtime": "eager", "on_timeout": "drop"}, "applies to rewards that can time out"),
        ({"runtime": "http", "on_timeout": "drop", "http": {"on_timeout": "fail"}}, "disagree"),
        ({"runtime": "eager", "http": {"retries": 2}}, "reward.http: applies to reward.runtime: http"),
        ({"replicas": 0}, "replicas"),
        ({"runtime": "http", "http": {"default_reward": float("nan")}}, "default_reward: Input should be a finite"),
        ({"runtime": "function", "default_reward": float("-inf")}, "default_reward: Input should be a finite"),
        ({"runtime": "http", "http_deadline_s": float("inf")}, "http_deadline_s: Input should be a finite"),
        ({"runtime": "http", "http": {"timeout_s": 1e300}}, "http.timeout_s: Input should be less than or equal"),
        ({"runtime": "http", "http": {"backoff_s": [1, 1e9]}}, "longest <= 86400"),
        ({"runtime": "http", "http": {"concurrency": 10**6}}, "http.concurrency: Input should be less than or equal"),
        ({"runtime": "http", "http": {"retries": -1}}, "http.retries"),
    ],
)
def test_bad_remote_settings_are_config_errors_before_anything_starts(tmp_path, reward, where) -> None:
    import yaml

    from rlsim.loop.config import load_run_config

    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"reward": reward}))
    with pytest.raises(ConfigError, match=where):
        load_run_config(path)


def test_run_config_on_timeout_reaches_the_running_runtimes_section() -> None:
    from rlsim.loop.config import RewardConfig

    http = RewardConfig.model_validate({"runtime": "http", "on_timeout": "drop", "default_reward": -1})
    assert (http.options()["on_timeout"], http.options()["default_reward"]) == ("drop", -1.0)
    function = RewardConfig.model_validate({"runtime": "function", "on_timeout": "drop"})
    assert function.options()["on_timeout"] == "drop"


def test_shared_limits_are_split_evenly_over_the_replicas() -> None:
    """``limits: shared``: the run's concurrency and rate, each replica a share; ``per_replica`` adds them up."""
    from rlsim.loop.config import RewardConfig

    http = {"concurrency": 7, "requests_per_minute": 90.0}
    shared = RewardConfig.model_validate({"runtime": "http", "replicas": 3, "http": {**http, "limits": "shared"}})
    each = shared.options()
    assert (each["concurrency"], each["requests_per_minute"]) == (2, 30.0)  # 3 x 2 <= 7: the limit holds
    own = RewardConfig.model_validate({"runtime": "http", "replicas": 3, "http": http}).options()
    assert (own["concurrency"], own["requests_per_minute"]) == (7, 90.0)
    with pytest.raises(ValueError, match="splits concurrency 2 over 3 replicas"):
        RewardConfig.model_validate({"runtime": "http", "replicas": 3, "http": {"concurrency": 2, "limits": "shared"}})
