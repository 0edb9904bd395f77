"""The frameworks' reward protocols on ``rlsim serve``: OpenRLHF's ``POST /get_reward`` and vLLM's
``POST /classify`` + ``GET /v1/models`` (which verl's and AReaL's reward loops call).

Each request is turned into the ``/score`` request it means and goes through the same path: the
same limits (413), the same dynamic batcher and back-pressure (503/504), the same metrics and the
same error bodies. So an OpenRLHF or verl run pointed at ``rlsim serve`` gets exactly the rewards
``/score`` gives for the same texts.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from fastapi import APIRouter, HTTPException

from rlsim.http_schemas import (
    ClassifyData,
    ClassifyRequest,
    ClassifyResponse,
    ModelCard,
    ModelList,
    RewardRequest,
    RewardResponse,
    ScoreRequest,
    ScoreResponse,
    UsageInfo,
    error_responses,
)

ScoreFn = Callable[[ScoreRequest], Awaitable[ScoreResponse]]

# The paths these protocols answer on, for the server's per-endpoint metrics.
PROTOCOL_PATHS = ("/get_reward", "/classify", "/v1/models")


@dataclass(frozen=True)
class ServedModel:
    """The model a client may name: ``name`` (the ``--model`` it was started with), its length limit
    in tokens and, for tokenizing runtimes, how to count a text's tokens (for classify's ``usage``)."""

    name: str
    max_length: int | None = None
    token_lengths: Callable[[Sequence[str]], list[int]] | None = None


def protocol_router(score: ScoreFn, served: Callable[[], ServedModel]) -> APIRouter:
    """The protocols' routes; ``score`` is the server's ``/score`` path, ``served()`` the model now served."""
    router = APIRouter(tags=["framework protocols"])

    @router.post("/get_reward", response_model=RewardResponse, responses=error_responses(400, 413, 422, 500, 503, 504))
    async def get_reward(request: RewardRequest) -> RewardResponse:
        """OpenRLHF's remote reward model: one reward per ``query`` text."""
        answer = await score(ScoreRequest.model_construct(texts=list(request.query), token_ids=None))
        return RewardResponse(rewards=answer.rewards, scores=list(answer.rewards), extra_logs={})

    @router.post(
        "/classify", response_model=ClassifyResponse, responses=error_responses(400, 404, 413, 422, 500, 503, 504)
    )
    async def classify(request: ClassifyRequest) -> ClassifyResponse:
        """vLLM's classification API: ``data[i].probs == [reward]`` for a one-label reward model."""
        model = served()
        if request.model is not None and request.model != model.name:
            # vLLM answers an unknown model with 404 too.
            raise HTTPException(
                404,
                f"model: the model `{request.model}` does not exist; this server serves `{model.name}` "
                "(GET /v1/models)",
            )
        texts, rows = request.texts, request.token_ids
        scoring = score(ScoreRequest.model_construct(texts=texts, token_ids=rows))
        answer, tokens = await asyncio.gather(scoring, _prompt_tokens(model, texts, rows))
        activate = bool(request.use_activation)
        data = [
            ClassifyData(index=i, label=None, probs=[_sigmoid(r) if activate else r], num_classes=1)
            for i, r in enumerate(answer.rewards)
        ]
        usage = UsageInfo(prompt_tokens=tokens, total_tokens=tokens)
        return ClassifyResponse(model=model.name, data=data, usage=usage)

    @router.get("/v1/models", response_model=ModelList)
    async def models() -> ModelList:
        """The one model this server scores with, under the name classify's ``model`` must give."""
        model = served()
        return ModelList(data=[ModelCard(id=model.name, root=model.name, max_model_len=model.max_length)])

    return router


async def _prompt_tokens(model: ServedModel, texts: list[str] | None, rows: list[list[int]] | None) -> int:
    """Tokens the model read (after truncation), as vLLM's ``usage.prompt_tokens`` counts them.

    Texts are tokenized once more in a worker thread, concurrently with scoring (the batcher does not
    report per-request token counts); a runtime that does not tokenize reports 0.
    """
    limit = model.max_length or math.inf
    if rows is not None:
        return int(sum(min(len(r), limit) for r in rows))
    if not texts or model.token_lengths is None:
        return 0
    lengths = await asyncio.to_thread(model.token_lengths, texts)
    return int(sum(min(n, limit) for n in lengths))


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))
