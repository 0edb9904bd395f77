"""``/openapi.json`` with the limits the server enforces, so a schema-valid request is an accepted one.

The request models (``rlsim.http_schemas``) say the types; what depends on the running
server is added here on every ``GET /openapi.json``: how many inputs one request may hold (``max_texts``),
characters per text (``max_text_chars``), ids per token row (``max_row_tokens``), the id range of the
loaded model's vocabulary (``[0, vocab_size)``, once it is loaded), and the one model id ``/classify``
answers to. An OpenAPI fuzzer found requests the schema called valid that the server refused (issue 28:
an empty token row on ``/classify``, ``prompts`` shorter than ``query``, ids outside the vocabulary);
every rule JSON Schema can state is stated, and the rest is written in the field's description.
"""

from __future__ import annotations

import copy
from typing import Any

from rlsim.serve.settings import ServeSettings

Schema = dict[str, Any]


def with_limits(doc: Schema, settings: ServeSettings, vocab_size: int | None, loaded: bool) -> Schema:
    """A copy of FastAPI's document ``doc`` with the server's limits in its request schemas.

    ``vocab_size``: the loaded runtime's (None: it takes texts only, or is not loaded yet: ``loaded``)."""
    out = copy.deepcopy(doc)
    schemas = out.get("components", {}).get("schemas", {})
    limits = _Limits(settings, vocab_size, loaded)
    texts_only = loaded and vocab_size is None
    if "ScoreRequest" in schemas:
        props = schemas["ScoreRequest"]["properties"]
        limits.texts(_non_null(props["texts"]))
        limits.rows(_non_null(props["token_ids"]))
        props["token_ids"]["description"] += limits.id_rule()
        if texts_only:
            props["token_ids"]["anyOf"] = [{"type": "null"}]
    if "RewardRequest" in schemas:
        props = schemas["RewardRequest"]["properties"]
        limits.texts(props["query"])
        for name in ("prompts", "labels"):
            _non_null(props[name])["maxItems"] = settings.max_texts
            props[name]["description"] += "; when given, exactly as many entries as query"
    if "ClassifyRequest" in schemas:
        props = schemas["ClassifyRequest"]["properties"]
        text, texts, row, rows = props["input"]["anyOf"]
        text["maxLength"] = settings.max_text_chars
        limits.texts(texts)
        texts["minItems"] = 1
        limits.row(row)
        limits.rows(rows)
        rows["minItems"] = 1
        props["input"]["description"] += limits.id_rule()
        if texts_only:
            props["input"]["anyOf"] = [text, texts]
        _non_null(props["model"])["enum"] = [settings.model]
    return out


class _Limits:
    """Writes one server's limits into array schemas of texts and of token-id rows."""

    def __init__(self, settings: ServeSettings, vocab_size: int | None, loaded: bool) -> None:
        self.settings, self.vocab_size, self.loaded = settings, vocab_size, loaded

    def texts(self, schema: Schema) -> None:
        schema["maxItems"] = self.settings.max_texts
        schema["items"]["maxLength"] = self.settings.max_text_chars

    def rows(self, schema: Schema) -> None:
        schema["maxItems"] = self.settings.max_texts
        self.row(schema["items"])

    def row(self, schema: Schema) -> None:
        schema["minItems"] = 1
        schema["maxItems"] = self.settings.max_row_tokens
        schema["items"]["minimum"] = 0
        if self.vocab_size:
            schema["items"]["maximum"] = self.vocab_size - 1

    def id_rule(self) -> str:
        if not self.loaded:
            return "; ids in [0, the model's vocabulary size): the bound is published here once the model is loaded"
        if self.vocab_size is None:
            return f"; runtime {self.settings.runtime!r} scores texts only, so token ids are refused (send texts)"
        return f"; ids in [0, {self.vocab_size}), the loaded model's vocabulary"


def _non_null(schema: Schema) -> Schema:
    """The non-null branch of an ``anyOf: [X, {"type": "null"}]`` (pydantic's ``X | None``), else ``schema``."""
    branches = [s for s in schema.get("anyOf", ()) if s.get("type") != "null"]
    return branches[0] if len(branches) == 1 else schema
