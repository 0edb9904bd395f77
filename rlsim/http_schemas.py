"""The request and response bodies of the three HTTP protocols rlsim speaks, as pydantic models: the one
definition both ends use, the server (``rlsim serve``, ``rlsim.serve``) to write and the ``http`` runtime's client
(``rlsim.scoring.http_protocols``) to read.

- rlsim's own: ``POST /score`` (``ScoreRequest``/``ScoreResponse``), ``GET /health`` (``HealthBody``) and the error
  bodies every refusal carries. Types are checked here (a wrong type is a 422); limits that depend on the server's
  settings (how many texts, how long) are checked by the app and answered with 413.
- OpenRLHF's remote reward model (``openrlhf/utils/remote_rm_utils.py`` posts ``{"query": [...],
  "prompts": [...], "labels": [...]}`` and reads ``rewards``; its trainer also reads ``scores`` and
  ``extra_logs``).
- vLLM's classification API (``vllm/entrypoints/pooling/classify/protocol.py``) and its model list
  (``vllm/entrypoints/serve/engine/protocol.py``): field names and defaults as in the installed
  vLLM 0.32, which the tests parse our answers with. vLLM itself is not imported here (it is heavy),
  so a client of these protocols (the ``http`` runtime) can use the same models.

Like vLLM (and OpenRLHF's example server), unknown request fields of the frameworks' protocols are accepted and
ignored; known fields are type-checked strictly (a wrong type is a 422 naming the field).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict

# "Exactly one of texts or token_ids, not null" in the published schema, so a client generated from
# /openapi.json knows that {} and {"texts": [...], "token_ids": [...]} are refused (pydantic cannot say it).
EXACTLY_ONE_INPUT: JsonDict = {
    "oneOf": [
        {"required": ["texts"], "properties": {"texts": {"type": "array"}}},
        {"required": ["token_ids"], "properties": {"token_ids": {"type": "array"}}},
    ]
}


def _integral(value: Any) -> Any:
    """JSON Schema's ``integer`` takes 5.0 (a number with no fraction), so the server does too; True does not."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# A reward-model token id: an integer in [0, vocab_size). The schema says >= 0 (and, once the model is loaded,
# the upper bound: openapi_limits.py); the app checks both, naming the row and the vocabulary.
TokenId = Annotated[StrictInt, BeforeValidator(_integral), Field(json_schema_extra={"minimum": 0})]


def check_encodable(texts: list[str] | None, field: str = "text") -> list[str] | None:
    """Refuse unpaired surrogates ("\\ud800"): JSON may carry them, but no tokenizer can take them."""
    for i, text in enumerate(texts or ()):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(
                f"{field} {i} holds an unpaired surrogate at character {err.start}; send valid UTF-8 text"
            ) from None
    return texts


class ScoreRequest(BaseModel):
    """``{"texts": [str, ...]}`` or ``{"token_ids": [[int, ...], ...]}`` (reward-model token ids)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=EXACTLY_ONE_INPUT)

    texts: list[StrictStr] | None = Field(default=None, description="texts to score, one reward each")
    token_ids: list[list[TokenId]] | None = Field(
        default=None, description="pre-tokenized rows in the reward model's vocabulary, special tokens included"
    )

    @field_validator("texts")
    @classmethod
    def _texts_are_encodable(cls, texts: list[str] | None) -> list[str] | None:
        return check_encodable(texts)

    @model_validator(mode="after")
    def _exactly_one_input(self) -> ScoreRequest:
        if (self.texts is None) == (self.token_ids is None):
            raise ValueError('give exactly one of "texts" (a list of strings) or "token_ids" (a list of lists of ints)')
        return self

    @property
    def count(self) -> int:
        return len(self.texts if self.texts is not None else self.token_ids or [])


class ScoreResponse(BaseModel):
    """One float32 reward per input, in order; ``truncated``: inputs cut to the model's length limit."""

    rewards: list[float]
    truncated: int


class ErrorBody(BaseModel):
    """Every refusal (4xx) and server fault (5xx): one readable sentence that names the field or limit."""

    detail: str


class ErrorItem(BaseModel):
    loc: list[str | int]
    type: str | None = None
    msg: str | None = None


class ValidationErrorBody(ErrorBody):
    """A 422. ``errors`` (one per problem, at most 10) comes with type errors found while parsing the
    body; a 422 for a value the model refuses (a token id outside the vocabulary) has ``detail`` only."""

    errors: list[ErrorItem] = Field(default_factory=list)


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route: the real body of each error status it can answer."""
    meaning = {
        400: "a body that is not JSON",
        404: "no such model",
        413: "over a request limit",
        422: "malformed request",
        500: "server fault",
        503: "loading, overloaded (see Retry-After) or shutting down",
        504: "not scored in time",
    }
    return {s: {"model": ValidationErrorBody if s == 422 else ErrorBody, "description": meaning[s]} for s in statuses}


def describe_validation_errors(errors: Sequence[dict[str, Any]], limit: int = 10) -> str:
    """One line per pydantic error, ``where: what``, without echoing the (possibly huge) input."""
    lines = []
    for e in errors[:limit]:
        where = ".".join(str(p) for p in e.get("loc", ())) or "body"
        lines.append(f"{where}: {e.get('msg', 'invalid')}")
    more = f" (and {len(errors) - limit} more)" if len(errors) > limit else ""
    return "invalid request: " + "; ".join(lines) + more


def error_summaries(errors: Sequence[dict[str, Any]], limit: int = 10) -> list[dict[str, Any]]:
    """The machine-readable part of a 422: location, type and message of each error, no inputs."""
    return [{"loc": list(e.get("loc", ())), "type": e.get("type"), "msg": e.get("msg")} for e in errors[:limit]]


class HealthBody(BaseModel):
    """``GET /health``: 200 when ``status`` is ``ready``, else 503 with ``Retry-After``."""

    status: str = Field(description="loading | ready | failed | stopping")
    runtime: str
    model: str
    detail: str
    load_s: float | None = None
    warmup_s: float | None = None
    max_batch_size: int | None = None
    max_queue: int | None = None
    max_texts: int | None = None


# The frameworks' protocols: OpenRLHF's /get_reward, vLLM's /classify and /v1/models.


class RewardRequest(BaseModel):
    """OpenRLHF ``POST /get_reward``: ``query`` holds the full texts to score (prompt + response)."""

    model_config = ConfigDict(extra="allow")

    query: list[StrictStr] = Field(min_length=1, description="texts to score (prompt + response), one reward each")
    prompts: list[StrictStr] | None = Field(default=None, description="the prompts alone (accepted, not used)")
    labels: list[Any] | None = Field(default=None, description="reference answers (accepted, not used)")

    @field_validator("query")
    @classmethod
    def _encodable(cls, query: list[str]) -> list[str]:
        check_encodable(query, "query")
        return query

    @model_validator(mode="after")
    def _same_lengths(self) -> RewardRequest:
        for name in ("prompts", "labels"):
            given = getattr(self, name)
            if given is not None and len(given) != len(self.query):
                raise ValueError(f"{name} has {len(given)} entries but query has {len(self.query)}; give one per query")
        return self


class RewardResponse(BaseModel):
    """``rewards`` (for advantages) and ``scores`` (for OpenRLHF's dynamic filtering) are the same values."""

    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]] = Field(default_factory=dict)


class ClassifyRequest(BaseModel):
    """vLLM ``POST /classify`` (completion form): ``input`` is a text, texts, or token-id row(s)."""

    model_config = ConfigDict(extra="allow")

    model: StrictStr | None = Field(default=None, description="the served model's id (GET /v1/models); default: it")
    input: StrictStr | list[StrictStr] | list[TokenId] | list[list[TokenId]] = Field(
        description="one text, a list of texts, one row of reward-model token ids, or a list of rows"
    )
    use_activation: StrictBool | None = Field(
        default=None,
        description="true: probs = sigmoid(reward); false or absent: probs = the raw reward (what an RL loop "
        "wants; vLLM's default for a one-label model would apply the sigmoid)",
    )
    user: StrictStr | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> ClassifyRequest:
        if isinstance(self.input, list) and not self.input:
            raise ValueError("input is an empty list; give a text, a list of texts or token-id rows")
        if isinstance(self.input, list) and self.input and isinstance(self.input[0], list) and not all(self.input):
            raise ValueError("input holds an empty token-id row; give at least one id per row")
        check_encodable(self.texts, "input")
        return self

    @property
    def texts(self) -> list[str] | None:
        if isinstance(self.input, str):
            return [self.input]
        return [t for t in self.input if isinstance(t, str)] or None

    @property
    def token_ids(self) -> list[list[int]] | None:
        if isinstance(self.input, str) or not self.input or isinstance(self.input[0], str):
            return None
        first = self.input[0]
        if isinstance(first, list):
            return [list(row) for row in self.input]  # type: ignore[arg-type]
        return [list(self.input)]  # type: ignore[arg-type]


class ClassifyData(BaseModel):
    index: int
    label: str | None = None
    probs: list[float]
    num_classes: int


class UsageInfo(BaseModel):
    prompt_tokens: int = 0
    total_tokens: int = 0
    completion_tokens: int | None = 0


class ClassifyResponse(BaseModel):
    id: str = Field(default_factory=lambda: f"classify-{uuid.uuid4().hex}")
    object: str = "list"
    created: int = Field(default_factory=lambda: int(time.time()))
    model: str
    data: list[ClassifyData]
    usage: UsageInfo


class ModelCard(BaseModel):
    id: str
    object: str = "model"
    created: int = Field(default_factory=lambda: int(time.time()))
    owned_by: str = "rlsim"
    root: str | None = None
    parent: str | None = None
    max_model_len: int | None = None
    permission: list[dict[str, Any]] = Field(default_factory=list)


class ModelList(BaseModel):
    object: str = "list"
    data: list[ModelCard] = Field(default_factory=list)
