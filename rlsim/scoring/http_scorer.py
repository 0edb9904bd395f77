"""The ``http`` runtime: score over real HTTP against ``rlsim serve`` on loopback, or any reward server.

Either it starts ``python -m rlsim serve`` wrapping ``settings.server_runtime`` on a free loopback
port (the server tokenizes, batches and runs the model), or it uses a running server at
``settings.url``, speaking ``settings.http_protocol`` (rlsim's ``/score``, OpenRLHF's ``/get_reward`` or
vLLM's ``/classify``: ``rlsim.scoring.http_protocols``). Requests go through one keep-alive ``httpx``
connection pool, at most ``reward.http.concurrency`` in flight and ``requests_per_minute`` started
(``rlsim.scoring.remote_calls``). Connection errors, attempts past ``timeout_s``, 429 (rate limited), 503
(queue full, loading) and 504 (timed out) are retried with exponential backoff, ``retries`` times or until
the batch's deadline; a request still unanswered then gets ``on_timeout``: the default reward, dropped
(NaN, the loop drops its group) or an ``RlsimError`` saying what failed, counted as ``timeouts`` in
``take_outcomes``. Scoring is idempotent, so a retry is safe.

No orphan servers: ``close()`` stops the child (SIGTERM, then SIGKILL), an ``atexit`` hook stops
any left at interpreter exit, and the child watches its parent and exits when the parent dies.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlsim.errors import RlsimError
from rlsim.models.builtin import BUILTIN_REWARD_MODELS
from rlsim.paths import process_folder
from rlsim.rewards.options import RemoteOptions, parse_options, unanswered_reward
from rlsim.scoring.base import SCORERS, RuntimeInfo, ScorerSettings, ScorerStats, register_scorer, unavailable_reason
from rlsim.scoring.http_process import LIVE as _LIVE
from rlsim.scoring.http_process import (
    in_process_runtimes,
    module_root,
    package_root,
    response_detail,
    retry_after_s,
    settings_flags,
    stop_server,
)
from rlsim.scoring.http_protocols import PROTOCOLS
from rlsim.scoring.needs import HTTP
from rlsim.scoring.remote_calls import Pacer, backoff_delay, requests_of
from rlsim.scoring.tokenizing import check_texts, load_reward_tokenizer
from rlsim.scoring.vllm_server import server_args, vllm_env

if TYPE_CHECKING:
    from rlsim.models.reward import RewardModelSpec

log = logging.getLogger(__name__)
HTTP_PREFIX = "rlsim-http-"  # the work folder of each scorer that starts a server (its port file and log)
RETRIED = (429, 503, 504)  # rate limited, queue full or loading, timed out


class _NoAnswer(Exception):
    """A request still unanswered once its retries or the batch's deadline ran out: ``what`` happened, the
    ``fix`` to name."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(what)
        self.what, self.fix = what, fix


def _free_port() -> int:
    """A loopback port nothing listens on now (for a server that cannot report the one it bound)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@register_scorer("http", RuntimeInfo(needs=HTTP, precision=None, server=True))
class HttpScorer:
    """``score_batch(texts)`` is one POST /score by default (chunked only past the server's ``max_texts``),
    or ``reward.http``'s requests, sent up to ``concurrency`` at once.

    The deadline for one batch, retries included, is ``settings.http_deadline_s``; how requests are sent,
    retried and stood in for: ``settings.options`` (``RemoteOptions``, ``reward.http``). Process timing
    knobs are class attributes (seconds): ``start_timeout_s`` for the server to load and warm up,
    ``stop_timeout_s`` for a graceful stop before SIGKILL.
    """

    name = "http"
    start_timeout_s = 300.0  # a first use may export the ONNX graph before serving
    stop_timeout_s = 30.0

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings) -> None:
        import httpx

        self.model, self.settings, self.stats = model, settings, ScorerStats()
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir = process_folder(HTTP_PREFIX)
        self._lock = threading.Lock()
        self._client: Any = None
        self._tokenizer: Any = None
        self._protocol = PROTOCOLS[settings.http_protocol]
        self._served_model: str | None = None  # vllm-classify: the id GET /v1/models lists
        self.remote: RemoteOptions = parse_options("http", settings.options)
        self._pacer = Pacer(self.remote.concurrency, self.remote.requests_per_minute)
        self._senders: ThreadPoolExecutor | None = None  # the threads that send one batch's requests at once
        self._outcomes: Counter[str] = Counter()
        # vLLM's own server, started here (server_runtime vllm, protocol vllm-classify, no url); else rlsim serve
        self._vllm_server = (
            settings.url is None and settings.server_runtime == "vllm" and (self._protocol.name == "vllm-classify")
        )
        try:
            url = settings.url.rstrip("/") if settings.url else self._start_server()
            self.url = url
            timeout = httpx.Timeout(settings.http_deadline_s, connect=5.0)
            pool = httpx.Limits(max_connections=max(100, self.remote.concurrency),
                                max_keepalive_connections=max(8, self.remote.concurrency))  # fmt: skip
            self._client = httpx.Client(base_url=url, timeout=timeout, limits=pool)
            self._max_texts = self._wait_ready()
        except BaseException:
            self.close()
            raise

    # ---- server process ------------------------------------------------------------------------------
    def _start_server(self) -> str:
        runtime = self.settings.server_runtime
        cls = SCORERS.get(runtime)  # unknown names fail here, listing the valid ones
        if SCORERS.info(runtime).server:
            raise RlsimError(
                f"server_runtime {runtime!r} would start servers recursively; use an in-process "
                f"runtime such as {', '.join(in_process_runtimes())}"
            )
        if self._vllm_server:
            return self._start_vllm_server()
        port_file = self._workdir / "port"
        cmd = [sys.executable, "-m", "rlsim", "serve", "--runtime", runtime, "--model", self._model_arg()]
        cmd += ["--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file), "--parent-pid", str(os.getpid())]
        # score_batch is one request: let the server take any batch a caller may send in one go, and
        # score it in one pass (the caller's batcher already chose the batch, as for every runtime).
        cmd += ["--max-texts", "8192", "--max-queue", "16384", "--max-text-chars", "10000000", "--sub-batch-size", "0"]
        cmd += settings_flags(self.settings)
        env = dict(os.environ)
        paths = [package_root()]
        if not cls.__module__.startswith("rlsim."):  # a runtime registered outside rlsim (a plug-in)
            cmd += ["--import", cls.__module__]
            paths.append(module_root(cls.__module__, runtime))
        env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [env.get("PYTHONPATH")] if p])
        with open(self._log_path, "wb") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
        _LIVE.add(self._proc)
        deadline = time.monotonic() + self.start_timeout_s
        while not port_file.is_file():
            self._check_alive("before listening")
            if time.monotonic() > deadline:
                raise self._not_ready("it never opened a port")
            time.sleep(0.05)
        return f"http://127.0.0.1:{int(port_file.read_text().strip())}"

    def _start_vllm_server(self) -> str:
        """vLLM's own OpenAI server for the reward model, under rlsim's supervisor (``rlsim.scoring.vllm_server``:
        it stops the server's process group on SIGTERM or when this process dies). vLLM writes no port file,
        so the port is a free one picked here; ready once ``/v1/models`` lists the model (``_wait_ready``)."""
        reason = unavailable_reason("vllm", self.settings.device)
        if reason:
            raise RlsimError(f"server_runtime vllm: {reason}")
        port = _free_port()
        served = self.model.name if "/" not in self.model.name else self.model.path.name
        args = server_args(self.model.path, served, port, self.settings)
        cmd = [sys.executable, "-m", "rlsim.scoring.vllm_server", "--parent-pid", str(os.getpid()), "--", *args]
        env = {**os.environ, **vllm_env(self.settings), "PYTHONPATH": package_root()}
        with open(self._log_path, "wb") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
        _LIVE.add(self._proc)
        return f"http://127.0.0.1:{port}"

    def _model_arg(self) -> str:
        return self.model.name if self.model.name in BUILTIN_REWARD_MODELS else str(self.model.path)

    @property
    def _log_path(self) -> Path:
        return self._workdir / "server.log"

    def _wait_ready(self) -> int:
        """Wait until the server can score; returns its ``max_texts`` per request (unlimited if it does not say).

        ``rlsim serve`` (started here, or at ``url`` with the rlsim protocol) says so on ``/health``; a vLLM
        server is ready once ``/v1/models`` lists the model; an OpenRLHF reward server has no probe, so the
        first batch's retries cover its start.
        """
        own_protocol = self._protocol.name == "rlsim" or (self._proc is not None and not self._vllm_server)
        max_texts = self._poll_health() if own_protocol else 1 << 30
        if self._protocol.name == "vllm-classify":
            self._served_model = self._poll_models()
        return max_texts

    def _poll_models(self) -> str:
        import httpx

        deadline = time.monotonic() + self.start_timeout_s
        while True:
            self._check_alive("before listing its models")
            try:
                r = self._client.get("/v1/models", timeout=5.0)
                if r.status_code == 200 and r.json().get("data"):
                    return str(r.json()["data"][0]["id"])
                last = f"/v1/models answered HTTP {r.status_code}"
            except (httpx.TransportError, ValueError, KeyError, TypeError) as err:
                last = f"{type(err).__name__}: {err}"
            if time.monotonic() > deadline:
                raise self._not_ready(last)
            time.sleep(0.2)

    def _poll_health(self) -> int:
        """Poll ``/health`` until ready; returns the server's ``max_texts`` per request."""
        import httpx

        deadline = time.monotonic() + self.start_timeout_s
        last = "no answer yet"
        while True:
            self._check_alive("before becoming ready")
            try:
                r = self._client.get("/health", timeout=5.0)
                body = r.json()
                if r.status_code == 200 and body.get("status") == "ready":
                    return int(body.get("max_texts") or 1 << 30)
                last = f"/health said {body.get('status')!r}: {body.get('detail')}"
                if body.get("status") == "failed" and self._proc is None:
                    raise RlsimError(f"the scoring server at {self.url} failed: {body.get('detail')}")
            except (httpx.TransportError, ValueError) as err:
                last = f"{type(err).__name__}: {err}"
            if time.monotonic() > deadline:
                raise self._not_ready(last)
            time.sleep(0.1)

    def _check_alive(self, when: str) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise RlsimError(
                f"the scoring server ({self.settings.server_runtime}) exited with status {self._proc.returncode} "
                f"{when}; its output ends with:\n{self._log_tail()}"
            )

    def _not_ready(self, last: str) -> RlsimError:
        where = getattr(self, "url", "(no port yet)")
        tail = f"; its output ends with:\n{self._log_tail()}" if self._proc is not None else ""
        return RlsimError(
            f"the scoring server at {where} did not become ready within {self.start_timeout_s:g} s ({last}); "
            f"check that it starts with `{self._server_command}`, or raise HttpScorer.start_timeout_s{tail}"
        )

    @property
    def _server_command(self) -> str:
        return "python -m vllm.entrypoints.openai.api_server" if self._vllm_server else "rlsim serve"

    def _log_tail(self, chars: int = 2000) -> str:
        try:
            text = self._log_path.read_text(errors="replace")
        except OSError:
            return "(no output)"
        return text[-chars:].strip() or "(no output)"

    @property
    def server_pid(self) -> int | None:
        """Pid of the server process this scorer started (None when it uses ``settings.url``)."""
        return self._proc.pid if self._proc is not None else None

    def server_exited(self) -> bool:
        """True once the server this scorer started has exited; it is never restarted here (the
        caller may close this scorer and make a new one, which starts a new server)."""
        return self._proc is not None and self._proc.poll() is not None

    # ---- scoring -----------------------------------------------------------------------------------
    @property
    def max_length(self) -> int:
        return min(self.settings.max_length or self.model.max_length, self.model.max_length)

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Untruncated reward-token lengths, counted client-side so batchers can plan http batches."""
        if not texts:
            return []
        if self._tokenizer is None:
            self._tokenizer = load_reward_tokenizer(self.model, self.settings)
        return [len(ids) for ids in self._tokenizer(list(texts), add_special_tokens=True)["input_ids"]]

    def score_batch(self, texts: Sequence[str]) -> np.ndarray:
        """POST the texts; float32 rewards ``(len(texts),)``. A request unanswered after its retries gets
        ``reward.http.on_timeout`` (NaN for ``drop``; ``fail`` raises ``RlsimError``)."""
        if len(texts) == 0:
            return np.zeros((0,), dtype=np.float32)
        check_texts(texts)
        o = self.remote
        parts = requests_of(range(len(texts)), o.request_size, o.concurrency, self._max_texts)
        chunks = [[texts[i] for i in part] for part in parts]
        if len(chunks) > 1 and o.concurrency > 1:
            if self._senders is None:
                self._senders = ThreadPoolExecutor(o.concurrency, thread_name_prefix="rlsim-http")
            answers = list(self._senders.map(self._score_request, chunks))
        else:
            answers = [self._score_request(chunk) for chunk in chunks]
        rewards = [x for got, _ in answers for x in got]
        truncated = sum(cut for _, cut in answers)
        with self._lock:
            self.stats.batches += 1
            self.stats.sequences += len(texts)
            self.stats.truncated += truncated
        return np.asarray(rewards, dtype=np.float32).reshape(len(texts))

    def _score_request(self, chunk: list[str]) -> tuple[list[float], int]:
        """One request's rewards and truncated count; unanswered, every row gets ``on_timeout``'s reward."""
        payload = self._protocol.request(chunk, self._served_model, self.max_length, self.settings.truncation)
        try:
            body = self._post(payload)
        except _NoAnswer as gone:
            return [self._stand_in(gone, len(chunk))] * len(chunk), 0
        return self._protocol.rewards(body, len(chunk), self.url)

    def take_outcomes(self) -> dict[str, int]:
        """Rows that got ``on_timeout`` (``timeouts``; ``dropped`` of them for ``drop``) and retried attempts
        (``retries``) since the last call."""
        with self._lock:
            out, self._outcomes = dict(self._outcomes), Counter()
        return out

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The answer's JSON body; ``_NoAnswer`` once the retries or the deadline run out."""
        import httpx

        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        headers = {"content-type": "application/json"}
        o = self.remote
        deadline = time.monotonic() + self.settings.http_deadline_s
        attempt, last = 0, ""
        while True:
            remaining = max(0.1, deadline - time.monotonic())
            per_try = min(remaining, o.timeout_s) if o.timeout_s else remaining
            wait_hint = 0.0
            with self._pacer.slot():
                try:
                    timeout = httpx.Timeout(per_try, connect=min(5.0, per_try))
                    r = self._client.post(self._protocol.path, content=data, headers=headers, timeout=timeout)
                except httpx.TransportError as err:
                    last = f"{type(err).__name__}: {err or 'no details'}"
                    r = None
            if r is not None:
                if r.status_code == 200:
                    return self._json(r)
                detail = response_detail(r)
                if r.status_code not in RETRIED:
                    raise RlsimError(
                        f"the scoring server at {self.url} refused the batch (HTTP {r.status_code}): {detail}"
                    )
                last = f"HTTP {r.status_code}: {detail}"
                wait_hint = retry_after_s(r)
            self._check_alive("while scoring")
            delay = backoff_delay(attempt, o.backoff_s, wait_hint)
            attempt += 1
            if o.retries is not None and attempt > o.retries:
                raise _NoAnswer(f"after {attempt} attempts (reward.http.retries: {o.retries}; last: {last})",
                                "reward.http.retries or reward.http.timeout_s")  # fmt: skip
            if time.monotonic() + delay > deadline:
                raise _NoAnswer(f"within {self.settings.http_deadline_s:g} s ({attempt} attempts; last: {last})",
                                "the deadline (ScorerSettings.http_deadline_s)")  # fmt: skip
            with self._lock:
                self._outcomes["retries"] += 1
            time.sleep(delay)

    def _json(self, r: Any) -> dict[str, Any]:
        try:
            return r.json()  # type: ignore[no-any-return]
        except ValueError:
            raise RlsimError(
                f"the server at {self.url} answered {self._protocol.path} with a body "
                "that is not JSON; check --url and --http-protocol"
            ) from None

    def _stand_in(self, gone: _NoAnswer, rows: int) -> float:
        """The reward of each row of a request that got no answer (``on_timeout``; ``fail`` raises), counted."""
        what = f"the scoring server at {self.url} did not score the batch {gone.what}"
        what += "; check that it is running and not overloaded"
        reward = unanswered_reward(self.remote.on_timeout, self.remote.default_reward, what, gone.fix)
        with self._lock:
            self._outcomes["timeouts"] += rows
            if self.remote.on_timeout == "drop":
                self._outcomes["dropped"] += rows
        log.warning(f"{what}: its {rows} rows get reward.http.on_timeout: {self.remote.on_timeout}")
        return reward

    def close(self) -> None:
        """Close the connection pool and stop the server this scorer started (idempotent)."""
        if self._senders is not None:
            self._senders.shutdown(wait=True)
            self._senders = None
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._proc is not None:
            stop_server(self._proc, self.stop_timeout_s)
        shutil.rmtree(self._workdir, ignore_errors=True)
