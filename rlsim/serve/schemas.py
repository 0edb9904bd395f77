"""The HTTP API's request and response bodies (pydantic), and the readable form of their errors.

Types are checked here (a wrong type is a 422); limits that depend on the server's settings
(how many texts, how long) are checked by the app and answered with 413.
"""

from __future__ import annotations

from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, field_validator, model_validator


class ScoreRequest(BaseModel):
    """``{"texts": [str, ...]}`` or ``{"token_ids": [[int, ...], ...]}`` (reward-model token ids)."""

    model_config = ConfigDict(extra="forbid")

    texts: list[StrictStr] | None = Field(default=None, description="texts to score, one reward each")
    token_ids: list[list[StrictInt]] | None = Field(
        default=None, description="pre-tokenized rows in the reward model's vocabulary, special tokens included"
    )

    @field_validator("texts")
    @classmethod
    def _texts_are_encodable(cls, texts: list[str] | None) -> list[str] | None:
        # JSON may carry unpaired surrogates ("\ud800"); no tokenizer can take them, so refuse them here.
        for i, text in enumerate(texts or ()):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as err:
                raise ValueError(
                    f"text {i} holds an unpaired surrogate at character {err.start}; send valid UTF-8 text"
                ) from None
        return texts

    @model_validator(mode="after")
    def _exactly_one_input(self) -> "ScoreRequest":
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
