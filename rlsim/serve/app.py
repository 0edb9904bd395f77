"""The FastAPI app: ``POST /score``, ``GET /health``, ``GET /metrics``.

The model loads in a background thread after the server starts listening, so ``/health`` can say
"loading" (503) and then "ready" (200, after load and warm-up) rather than refusing connections.
Answers: 200 rewards; 413 request over a limit; 422 malformed request; 503 (with ``Retry-After``)
queue full, still loading or shutting down; 504 not scored within ``request_timeout_s``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from rlsim.batching.dynamic import BatcherClosed, QueueFull
from rlsim.errors import RlsimError
from rlsim.http_schemas import (
    HealthBody,
    ScoreRequest,
    ScoreResponse,
    describe_validation_errors,
    error_responses,
    error_summaries,
)
from rlsim.serve.backend import ScoreJob, ScoringBackend
from rlsim.serve.metrics import CONTENT_TYPE, ServerMetrics
from rlsim.serve.middleware import BodyLimit, RequestAccounting
from rlsim.serve.openapi_limits import with_limits
from rlsim.serve.protocols import ServedModel, protocol_router
from rlsim.serve.settings import ServeSettings

BackendFactory = Callable[[ServerMetrics], ScoringBackend]


# The server's own lines (listening, ready, stopped, errors): `rlsim serve` shows them on stderr (rlsim/logs.py).
log = logging.getLogger(__name__)


class ServerState:
    """Lifecycle of the model behind the app: loading -> ready -> stopping (or loading -> failed)."""

    def __init__(self, settings: ServeSettings, factory: BackendFactory, on_load_failure: Callable[[], None]) -> None:
        self.settings = settings
        self.metrics = ServerMetrics()
        self.status = "loading"
        self.error: str | None = None
        self.backend: ScoringBackend | None = None
        self.load_s = 0.0
        self._factory = factory
        self._on_load_failure = on_load_failure
        self._lock = threading.Lock()

    def load(self) -> None:
        """Build the scorer and warm it up (worker thread); on failure, say why and stop the server."""
        t0 = time.perf_counter()
        try:
            backend = self._factory(self.metrics)
            if self.settings.warmup:
                backend.warm_up()
        except Exception as err:  # noqa: BLE001 - reported on /health and stderr, then the server exits
            self.error = str(err) if isinstance(err, RlsimError) else f"{type(err).__name__}: {err}"
            self.status = "failed"
            log.error(f"the model could not be loaded: {self.error}")
            self._on_load_failure()
            return
        with self._lock:
            if self.status == "stopping":  # shut down while loading: nobody will use it
                backend.close(0)
                return
            self.backend, self.load_s = backend, time.perf_counter() - t0
            self.metrics.watch_queue(lambda: backend.queued_sequences, lambda: backend.queued_requests)
            self.metrics.ready.set(1)
            self.status = "ready"
        log.info(f"ready: {self.settings.runtime} on {self.settings.model} (load {self.load_s:.1f} s incl. warm-up)")

    def stop(self) -> None:
        """Refuse new work, finish the accepted jobs (up to the grace period), release the model."""
        with self._lock:
            if self.status != "failed":  # keep the reason a failed server stopped
                self.status = "stopping"
            backend = self.backend
            self.metrics.ready.set(0)
        if backend is not None:
            backend.close(self.settings.shutdown_grace_s)

    def ready_backend(self) -> ScoringBackend:
        backend = self.backend
        if self.status != "ready" or backend is None:
            raise HTTPException(503, self.health()["detail"], headers={"Retry-After": "1"})
        return backend

    def served_model(self) -> ServedModel:
        """What ``GET /v1/models`` lists and classify's ``model`` must name; the length limit once loaded."""
        scorer = self.backend.scorer if self.backend is not None else None
        if scorer is not None:  # every Scorer knows its length limit and counts tokens
            return ServedModel(self.settings.model, scorer.max_length, scorer.token_lengths)
        return ServedModel(self.settings.model)

    def health(self) -> dict[str, Any]:
        s = self.settings
        body: dict[str, Any] = {"status": self.status, "runtime": s.runtime, "model": s.model}
        if self.status == "ready" and self.backend is not None:
            body.update(load_s=round(self.load_s, 3), warmup_s=round(self.backend.warmup_s, 3))
            body.update(max_batch_size=s.max_batch_size, max_queue=s.max_queue, max_texts=s.max_texts)
        body["detail"] = {
            "loading": "the model is loading and warming up; retry shortly",
            "ready": "ready",
            "failed": f"the model could not be loaded: {self.error}",
            "stopping": "the server is shutting down; accepted requests are being finished",
        }[self.status]
        return body


def create_app(
    settings: ServeSettings, factory: BackendFactory, on_load_failure: Callable[[], None] = lambda: None
) -> FastAPI:
    """The app for ``settings``; ``factory(metrics)`` builds the backend in a background thread."""
    state = ServerState(settings, factory, on_load_failure)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        threading.Thread(target=state.load, name="rlsim-serve-load", daemon=True).start()
        yield
        # Runs after uvicorn stopped accepting and the in-flight requests were answered.
        await asyncio.to_thread(state.stop)

    app = FastAPI(title="rlsim reward scoring", version="1", lifespan=lifespan)
    app.state.rlsim = state
    _add_handlers(app)
    # Added last = outermost: accounting sees the 413s the body limit answers itself.
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestAccounting, metrics=state.metrics)

    @app.post("/score", response_model=ScoreResponse, responses=error_responses(400, 413, 422, 500, 503, 504))
    async def score(request: ScoreRequest) -> ScoreResponse:
        return await score_request(state, request)

    @app.get("/health", response_model=HealthBody, responses={503: {"model": HealthBody, "description": "not ready"}})
    async def health() -> JSONResponse:
        body = state.health()
        ready = body["status"] == "ready"
        return JSONResponse(body, status_code=200 if ready else 503, headers=None if ready else {"Retry-After": "1"})

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        responses={200: {"description": "Prometheus text exposition format (version 0.0.4)"}},
    )
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type=CONTENT_TYPE)

    # The frameworks' protocols share /score's path through the batcher, limits and metrics.
    app.include_router(protocol_router(lambda request: score_request(state, request), state.served_model))
    _publish_limits(app, state)
    return app


def _publish_limits(app: FastAPI, state: ServerState) -> None:
    """``/openapi.json`` states this server's limits and, once loaded, its vocabulary (``openapi_limits.py``)."""
    plain = app.openapi  # FastAPI's generator, which caches the document it builds

    def openapi() -> dict[str, Any]:
        backend = state.backend if state.status == "ready" else None
        vocab = backend.vocab_size if backend is not None else None
        return with_limits(plain(), state.settings, vocab, loaded=backend is not None)

    app.openapi = openapi  # type: ignore[method-assign]


async def score_request(state: ServerState, request: ScoreRequest) -> ScoreResponse:
    """Check ``request`` against the limits, queue it in the batcher and wait for its rewards."""
    settings = state.settings
    backend = state.ready_backend()
    job = make_job(request, settings, backend.vocab_size, settings.runtime)
    if job.size == 0:
        return ScoreResponse(rewards=[], truncated=0)
    result = await _run_job(backend, job, settings.request_timeout_s)
    state.metrics.sequences.inc(job.size)
    state.metrics.truncated.inc(result.truncated)
    return ScoreResponse(rewards=result.rewards, truncated=result.truncated)


async def _run_job(backend: ScoringBackend, job: ScoreJob, timeout_s: float) -> Any:
    try:
        future = backend.submit(job)
    except QueueFull as err:
        raise HTTPException(503, str(err), headers={"Retry-After": str(backend.retry_after_s())}) from None
    except BatcherClosed:
        raise HTTPException(503, "the server is shutting down; retry shortly", headers={"Retry-After": "1"}) from None
    try:
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)
    except asyncio.TimeoutError:
        raise HTTPException(
            504, f"not scored within {timeout_s:g} s (server overloaded or model stalled); retry, or raise the timeout"
        ) from None
    except RlsimError as err:  # the runtime refused this input
        raise HTTPException(422, str(err)) from None


def make_job(request: ScoreRequest, settings: ServeSettings, vocab_size: int | None, runtime: str) -> ScoreJob:
    """Check the request against the limits (413) and the vocabulary (422); never queue bad input."""
    if request.count > settings.max_texts:
        raise HTTPException(
            413, f"{request.count} inputs in one request; the limit is {settings.max_texts} (max_texts): split it"
        )
    if request.texts is not None:
        for i, text in enumerate(request.texts):
            if len(text) > settings.max_text_chars:
                raise HTTPException(
                    413,
                    f"text {i} has {len(text)} characters; the limit is {settings.max_text_chars} "
                    "(max_text_chars): shorten it (the model reads only its first/last max_length tokens)",
                )
        return ScoreJob(texts=list(request.texts))
    if vocab_size is None:
        raise HTTPException(422, f'runtime {runtime!r} scores texts only; send {{"texts": [...]}}')
    rows = request.token_ids or []
    for i, row in enumerate(rows):
        if not row:
            raise HTTPException(422, f"token_ids row {i} is empty; give at least one token id per row")
        if len(row) > settings.max_row_tokens:
            raise HTTPException(
                413, f"token_ids row {i} has {len(row)} ids; the limit is {settings.max_row_tokens} (max_row_tokens)"
            )
        low, high = min(row), max(row)
        if low < 0 or high >= vocab_size:
            bad = str(low if low < 0 else high)
            shown = bad if len(bad) <= 24 else f"a {len(bad)}-digit number"
            raise HTTPException(
                422, f"token_ids row {i} holds {shown}, outside the vocabulary [0, {vocab_size}); send reward-model ids"
            )
    return ScoreJob(token_ids=[list(r) for r in rows])


def _add_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        return JSONResponse(
            {"detail": describe_validation_errors(errors), "errors": error_summaries(errors)}, status_code=422
        )

    @app.exception_handler(Exception)
    async def server_fault(request: Request, exc: Exception) -> JSONResponse:
        # A 500 is a server bug, never the client's fault; say what broke without a traceback.
        log.error(f"while answering {request.url.path}: {type(exc).__name__}: {exc}")
        return JSONResponse({"detail": f"internal error: {type(exc).__name__}: {exc}"}, status_code=500)
