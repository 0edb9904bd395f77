"""Request and response bodies of the frameworks' reward protocols, as pydantic models.

- OpenRLHF's remote reward model (``openrlhf/utils/remote_rm_utils.py`` posts ``{"query": [...],
  "prompts": [...], "labels": [...]}`` and reads ``rewards``; its trainer also reads ``scores`` and
  ``extra_logs``).
- vLLM's classification API (``vllm/entrypoints/pooling/classify/protocol.py``) and its model list
  (``vllm/entrypoints/serve/engine/protocol.py``): field names and defaults as in the installed
  vLLM 0.32, which the tests parse our answers with. vLLM itself is not imported here (it is heavy),
  so a client of these protocols (the ``http`` runtime) can use the same models.

Like vLLM (and OpenRLHF's example server), unknown request fields are accepted and ignored; known
fields are type-checked strictly (a wrong type is a 422 naming the field).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator, model_validator

from rlsim.serve.schemas import TokenId, check_encodable


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
