"""The ``http`` runtime against a real ``rlsim serve`` process on loopback (and a stub for retry logic).

The stub stands in only for the server's *answers* (503 twice, then 200, ...) so the client's retry
and error handling can be driven exactly; everything else runs the real server.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import psutil
import pytest

from rlsim.errors import RlsimError
from rlsim.paths import process_folder
from rlsim.scoring import http_scorer, make_scorer, register_scorer
from rlsim.scoring.base import ScorerSettings
from rlsim.scoring.http_scorer import HttpScorer
from tests.helpers.scripted_server import read_json, scripted_server, send_json

WAIT = 60.0


@register_scorer("test-http-broken")
class BrokenRuntime:
    """Registered here so the server process (which imports this module) fails to load it."""

    name = "test-http-broken"

    def __init__(self, model: object, settings: ScorerSettings) -> None:
        raise RlsimError("broken on purpose: the weights are missing")


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pid: int) -> None:
    end = time.monotonic() + WAIT
    while not gone(pid):
        assert time.monotonic() < end, f"server process {pid} is still running"
        time.sleep(0.1)


@pytest.mark.slow  # starts an rlsim serve process with a real model (~4-5 s each)
def test_http_matches_eager_and_a_dead_server_fails_fast(minilm, texts) -> None:
    eager = make_scorer("eager", minilm, ScorerSettings(threads=1, max_length=64))
    http = make_scorer("http", minilm, ScorerSettings(server_runtime="eager", threads=1, max_length=64))
    try:
        direct = eager.score_batch(texts)
        served = http.score_batch(texts)
        assert served.dtype == np.float32 and served.shape == (len(texts),)
        np.testing.assert_allclose(served, direct, atol=1e-5, rtol=0)
        assert http.stats.truncated == eager.stats.truncated > 0  # max_length 64 cuts the long texts
        assert http.score_batch([]).shape == (0,)
        pid = http._proc.pid
        os.kill(pid, signal.SIGKILL)
        wait_gone(pid)
        with pytest.raises(RlsimError, match="exited with status"):
            http.score_batch(["after the crash"])
    finally:
        http.close()
        eager.close()
    assert not http_scorer._LIVE


@pytest.mark.slow  # starts an rlsim serve process with a real model (~4-5 s each)
def test_server_dies_with_the_process_that_started_it(minilm) -> None:
    script = (
        "from rlsim.models import resolve_reward_model; from rlsim.scoring import make_scorer, ScorerSettings\n"
        "settings = ScorerSettings(server_runtime='eager', threads=1)\n"
        "s = make_scorer('http', resolve_reward_model('minilm-rm'), settings)\n"
        "print(s._proc.pid, s._workdir, flush=True)\nimport time; time.sleep(600)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=dict(os.environ))
    try:
        pid, folder = owner.stdout.readline().decode().split()
        owner.kill()  # SIGKILL: no cleanup code in the owner runs
        owner.wait()
        wait_gone(int(pid))
        # Its work folder (port file, server log) is left behind; the next scorer's folder removes it.
        assert Path(folder).is_dir() and Path(folder).name.startswith(f"{http_scorer.HTTP_PREFIX}{owner.pid}-")
        shutil.rmtree(process_folder(http_scorer.HTTP_PREFIX))
        assert not Path(folder).exists()
    finally:
        owner.kill()
        owner.wait()
        owner.stdout.close()


def test_server_that_never_gets_ready_is_stopped_and_reported(minilm, monkeypatch) -> None:
    monkeypatch.setattr(HttpScorer, "start_timeout_s", 0.5)  # python alone starts slower than that
    with pytest.raises(RlsimError, match="did not become ready within 0.5 s"):
        make_scorer("http", minilm, ScorerSettings(server_runtime="eager"))
    assert not http_scorer._LIVE


def test_server_that_fails_to_load_reports_its_reason(minilm) -> None:
    with pytest.raises(RlsimError) as info:
        make_scorer("http", minilm, ScorerSettings(server_runtime="test-http-broken"))
    assert "exited with status 2" in str(info.value) and "broken on purpose" in str(info.value)
    assert not http_scorer._LIVE


def test_unknown_or_recursive_server_runtime_is_refused_before_starting(minilm) -> None:
    with pytest.raises(RlsimError, match="valid names"):
        make_scorer("http", minilm, ScorerSettings(server_runtime="nope"))
    with pytest.raises(RlsimError, match="recursively"):
        make_scorer("http", minilm, ScorerSettings(server_runtime="http"))


# ---- retry logic against scripted answers ------------------------------------------------------------
class Script:
    """Answers for POST /score, in order (the last one repeats); records how many posts arrived."""

    def __init__(self, answers: list[tuple[int, dict]]) -> None:
        self.answers, self.posts = answers, 0


@pytest.fixture
def stub() -> Iterator[tuple[str, Script]]:
    script = Script([])

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            send_json(self, 200, {"status": "ready", "max_texts": 2})

        def do_POST(self) -> None:
            n = len(read_json(self)["texts"])
            status, body = script.answers[min(script.posts, len(script.answers) - 1)]
            script.posts += 1
            body = {"rewards": [0.5] * n, "truncated": 0} if status == 200 else body
            send_json(self, status, body, {"retry-after": "0"} if status == 503 else {})

    with scripted_server(Handler) as url:
        yield url, script


def test_retries_503_then_succeeds_and_chunks_past_max_texts(minilm, stub) -> None:
    url, script = stub
    script.answers = [(503, {"detail": "queue full"}), (503, {"detail": "queue full"}), (200, {})]
    scorer = make_scorer("http", minilm, ScorerSettings(url=url))
    try:
        rewards = scorer.score_batch(["a", "b", "c"])
    finally:
        scorer.close()
    assert rewards.tolist() == [0.5, 0.5, 0.5]
    assert script.posts == 4  # two refused, then chunks of max_texts=2: ["a", "b"] and ["c"]
    assert scorer.stats.batches == 1 and scorer.stats.sequences == 3


def test_persistent_503_fails_after_the_deadline_naming_the_problem(minilm, stub, monkeypatch) -> None:
    url, script = stub
    script.answers = [(503, {"detail": "queue full (9 of 8 queued)"})]
    scorer = make_scorer("http", minilm, ScorerSettings(url=url, http_deadline_s=0.5))
    try:
        with pytest.raises(RlsimError, match=r"did not score the batch within 0.5 s .*HTTP 503: queue full"):
            scorer.score_batch(["a"])
    finally:
        scorer.close()
    assert script.posts >= 2


def test_client_errors_are_not_retried(minilm, stub) -> None:
    url, script = stub
    script.answers = [(422, {"detail": "text 0 is too odd"})]
    scorer = make_scorer("http", minilm, ScorerSettings(url=url))
    try:
        with pytest.raises(RlsimError, match="HTTP 422.*too odd"):
            scorer.score_batch(["a"])
        with pytest.raises(RlsimError, match="unpaired surrogate"):
            scorer.score_batch(["\ud800"])
    finally:
        scorer.close()
    assert script.posts == 1


def test_unreachable_url_is_reported_within_the_start_deadline(minilm, monkeypatch) -> None:
    monkeypatch.setattr(HttpScorer, "start_timeout_s", 0.5)
    with pytest.raises(RlsimError, match="did not become ready.*ConnectError"):
        make_scorer("http", minilm, ScorerSettings(url="http://127.0.0.1:9"))


@pytest.mark.slow  # starts an rlsim serve process with a real model (~4-5 s each)
def test_http_scorer_gives_token_lengths_for_batch_planning():
    """Batchers (and the loop's reward stage) plan http batches by length with the client-side tokenizer."""
    from rlsim.batching import make_batcher, score_texts
    from rlsim.models import resolve_reward_model
    from rlsim.scoring import ScorerSettings, make_scorer

    spec = resolve_reward_model("minilm-rm")
    scorer = make_scorer("http", spec, ScorerSettings(server_runtime="ort"))
    try:
        texts = ["one", "two words here " * 20, "three"]
        rewards, report = score_texts(scorer, texts, make_batcher("sorted", size=2))
        direct = make_scorer("ort", spec).score_batch(texts)
        assert abs(rewards - direct).max() < 1e-5
        assert report.batches == 2
    finally:
        scorer.close()
