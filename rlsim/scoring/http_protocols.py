"""The wire protocols the ``http`` runtime speaks to a reward server (``ScorerSettings.http_protocol``).

- ``rlsim``: ``POST /score`` ``{"texts": [...]}`` -> ``{"rewards": [...], "truncated": n}`` (``rlsim serve``).
- ``openrlhf``: OpenRLHF's remote reward model, ``POST /get_reward`` ``{"query": [...]}`` -> ``{"rewards": [...]}``.
- ``vllm-classify``: vLLM's classification API, ``POST /classify`` ``{"model", "input": [...], "use_activation":
  false, "truncate_prompt_tokens", "truncation_side"}`` -> ``data[i].probs`` (one label: the raw reward, since
  the sigmoid is switched off; texts cut to the client's ``max_length`` on its ``truncation`` side, where vLLM
  would refuse a text longer than the model's context); the model name comes from ``GET /v1/models``, which is
  also how readiness is seen on a vLLM server.

Bodies are read with the same pydantic models ``rlsim serve`` writes them with (``rlsim.http_schemas``),
which the serve tests check against the installed vLLM's own classes. ``rlsim serve`` answers all three, so
the runtime can start its own server and talk to it in any of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from rlsim.errors import RlsimError
from rlsim.http_schemas import ClassifyResponse, ScoreResponse

HttpProtocol = Literal["rlsim", "openrlhf", "vllm-classify"]
HTTP_PROTOCOLS: tuple[str, ...] = ("rlsim", "openrlhf", "vllm-classify")


class OpenRlhfAnswer(BaseModel):
    """What OpenRLHF's own client (``remote_rm_utils.py``) reads of an answer: ``rewards`` only; ``rlsim serve``
    also sends ``scores`` and ``extra_logs`` (``RewardResponse``), other servers need not."""

    rewards: list[float]


def check_protocol(name: str, source: str = "http_protocol") -> None:
    """RlsimError naming the valid protocols unless ``name`` is one."""
    if name not in HTTP_PROTOCOLS:
        raise RlsimError(f"{source}: unknown protocol {name!r}; valid: {', '.join(HTTP_PROTOCOLS)}")


@dataclass(frozen=True)
class WireProtocol:
    """How one batch of texts becomes a request body at ``path``, and the answer becomes rewards."""

    name: str
    path: str

    def request(
        self, texts: Sequence[str], model: str | None, max_length: int | None = None, truncation: str = "left"
    ) -> dict[str, Any]:
        """The body for ``texts``; ``max_length`` / ``truncation`` (vllm-classify only): tokens kept and which end
        is cut (``rlsim serve`` and OpenRLHF servers truncate with their own settings)."""
        if self.name == "rlsim":
            return {"texts": list(texts)}
        if self.name == "openrlhf":
            return {"query": list(texts)}
        body: dict[str, Any] = {"model": model, "input": list(texts), "use_activation": False}
        if max_length is not None:
            body.update(truncate_prompt_tokens=max_length, truncation_side=truncation)
        return body

    def rewards(self, body: Any, count: int, url: str) -> tuple[list[float], int]:
        """``(rewards, truncated)`` from an answer to ``count`` texts; RlsimError if it is not this protocol's."""
        try:
            if self.name == "rlsim":
                parsed = ScoreResponse.model_validate(body)
                rewards, truncated = list(parsed.rewards), int(parsed.truncated)
            elif self.name == "openrlhf":
                rewards, truncated = list(OpenRlhfAnswer.model_validate(body).rewards), 0
            else:
                rewards, truncated = _classify_rewards(ClassifyResponse.model_validate(body), url), 0
        except ValidationError as err:
            first = err.errors()[0]
            raise RlsimError(
                f"the server at {url} answered {self.path} with a body that is not {self.name}'s "
                f"({'.'.join(str(x) for x in first['loc'])}: {first['msg']}); check --http-protocol "
                "and --url"
            ) from None
        if len(rewards) != count:
            raise RlsimError(f"the server at {url} returned {len(rewards)} rewards for {count} texts on {self.path}")
        return rewards, truncated


def _classify_rewards(parsed: Any, url: str) -> list[float]:
    rows = sorted(parsed.data, key=lambda d: d.index)
    wide = [d.num_classes for d in rows if len(d.probs) != 1]
    if wide:
        raise RlsimError(
            f"the model served at {url} is a {wide[0]}-label classifier; a reward model has one label "
            "(serve a sequence-classification model with num_labels=1)"
        )
    return [float(d.probs[0]) for d in rows]


PROTOCOLS: dict[str, WireProtocol] = {
    "rlsim": WireProtocol("rlsim", "/score"),
    "openrlhf": WireProtocol("openrlhf", "/get_reward"),
    "vllm-classify": WireProtocol("vllm-classify", "/classify"),
}
