"""``/openapi.json`` tells the truth: what each endpoint takes, answers and refuses, checked against a
running server by hand (the three places a fuzzer found wrong) and by a bounded schemathesis run.
"""

from __future__ import annotations

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings

from rlsim.scoring.base import ScorerSettings
from tests.helpers.tiny_scorer import TextOnlyScorer, tiny_spec

schemathesis = pytest.importorskip("schemathesis")
from schemathesis import GenerationMode  # noqa: E402
from schemathesis import checks as st_checks  # noqa: E402
from schemathesis.config import SchemathesisConfig  # noqa: E402

# A request over a limit the schema states is refused with 413 (Content Too Large), a rejection like a 422.
REJECTIONS = SchemathesisConfig.from_dict(
    {"checks": {"negative_data_rejection": {"expected-statuses": ["400", "404", "413", "422"]}}}
)
ENDPOINTS = {
    ("/score", "post"),
    ("/get_reward", "post"),
    ("/classify", "post"),
    ("/v1/models", "get"),
    ("/health", "get"),
    ("/metrics", "get"),
}


@pytest.fixture
def served(start_server):
    srv = start_server(max_texts=8, max_text_chars=2000, max_row_tokens=256, max_queue=64)
    with srv.client() as client:
        doc = client.get("/openapi.json").json()
    return srv, doc


def validator(doc: dict, component: str) -> jsonschema.Draft202012Validator:
    # FastAPI writes OpenAPI 3.1, whose schemas are JSON Schema 2020-12; refs resolve inside the document.
    return jsonschema.Draft202012Validator({"$ref": f"#/components/schemas/{component}", **doc})


def response_schema(doc: dict, path: str, method: str, status: str) -> dict:
    return doc["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]


def test_every_endpoint_is_documented(served) -> None:
    _, doc = served
    documented = {(p, m) for p, ops in doc["paths"].items() for m in ops}
    assert documented == ENDPOINTS


def test_metrics_is_documented_as_prometheus_text(served) -> None:
    srv, doc = served
    content = doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(content) == ["text/plain"]
    with srv.client() as client:
        assert client.get("/metrics").headers["content-type"].startswith("text/plain")


@pytest.mark.parametrize(
    "path, body",
    [
        ("/score", {"texts": 3}),  # a type error: detail + errors
        ("/score", {"token_ids": [[10**6]]}),  # a refused value: detail only
        ("/get_reward", {"query": []}),
        ("/classify", {"input": None}),
    ],
)
def test_422_bodies_match_the_documented_schema(served, path, body) -> None:
    srv, doc = served
    with srv.client() as client:
        r = client.post(path, json=body)
    assert r.status_code == 422
    ref = response_schema(doc, path, "post", "422")["$ref"].rsplit("/", 1)[1]
    validator(doc, ref).validate(r.json())
    # FastAPI's own default (detail as an array) must not be what is published.
    assert "HTTPValidationError" not in doc["components"]["schemas"]


def test_score_schema_says_exactly_one_of_texts_or_token_ids(served) -> None:
    srv, doc = served
    request = doc["paths"]["/score"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    check = validator(doc, request["$ref"].rsplit("/", 1)[1])
    cases = [
        {},
        {"texts": ["a"], "token_ids": [[1]]},
        {"texts": None, "token_ids": None},
        {"texts": ["a"]},
        {"token_ids": [[1]]},
        {"texts": None, "token_ids": [[1]]},
    ]
    with srv.client() as client:
        for body in cases:
            accepted = client.post("/score", json=body).status_code == 200
            assert check.is_valid(body) == accepted, body


def test_schemathesis_finds_no_disagreement(served) -> None:
    """Schema-valid and schema-invalid requests against every operation: no 5xx, every status, content
    type, header and body as documented, and every schema-invalid request refused."""
    srv, _ = served
    schema = schemathesis.openapi.from_url(f"{srv.url}/openapi.json", config=REJECTIONS)
    selected = [
        st_checks.not_a_server_error,
        st_checks.status_code_conformance,
        st_checks.content_type_conformance,
        st_checks.response_headers_conformance,
        st_checks.response_schema_conformance,
        st_checks.negative_data_rejection,
    ]
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if mode is GenerationMode.NEGATIVE and operation.method.upper() == "GET":
                continue  # no parameters to break

            @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
            @given(operation.as_strategy(generation_mode=mode))
            def case(c) -> None:
                c.call_and_validate(checks=selected)

            case()


def request_validator(doc: dict, path: str) -> jsonschema.Draft202012Validator:
    request = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return validator(doc, request["$ref"].rsplit("/", 1)[1])


def test_the_schema_states_the_limits_the_server_enforces(served) -> None:
    """The fuzzer's three finds, the request limits and the vocabulary: schema-valid exactly when accepted."""
    srv, doc = served
    vocab = srv.state.backend.vocab_size
    cases = {
        "/score": [
            {"token_ids": [[vocab - 1, 0]]},
            {"token_ids": [[vocab]]},  # outside the vocabulary (the fuzzer's third find)
            {"token_ids": [[-1]]},
            {"token_ids": [[]]},
            {"token_ids": [[1] * 256]},
            {"token_ids": [[1] * 257]},  # max_row_tokens
            {"texts": ["a"] * 8},
            {"texts": ["a"] * 9},  # max_texts
            {"texts": ["a" * 2000]},
            {"texts": ["a" * 2001]},  # max_text_chars
            {"token_ids": [[5.0, 7]]},  # JSON Schema's integer takes 5.0, so the server does
            {"token_ids": [[True]]},
        ],
        "/classify": [
            {"input": [[]]},  # an empty token row (the fuzzer's first find)
            {"input": []},
            {"input": [1, 2]},
            {"input": [[1], [2]]},
            {"input": [vocab]},
            {"input": "a" * 2001},
            {"input": ["a"] * 9},
            {"input": "a", "model": "tiny-test"},
            {"input": "a", "model": "another"},
        ],
        "/get_reward": [{"query": ["a"] * 9}, {"query": ["a"], "prompts": ["p"] * 9}, {"query": ["a"] * 8}],
    }
    with srv.client() as client:
        for path, bodies in cases.items():
            check = request_validator(doc, path)
            for body in bodies:
                status = client.post(path, json=body).status_code
                assert check.is_valid(body) == (status == 200), (path, str(body)[:80], status)
    # What JSON Schema cannot state is in the description: prompts and labels come one per query.
    props = doc["components"]["schemas"]["RewardRequest"]["properties"]
    assert all("exactly as many entries as query" in props[k]["description"] for k in ("prompts", "labels"))
    assert f"[0, {vocab})" in doc["components"]["schemas"]["ScoreRequest"]["properties"]["token_ids"]["description"]


def test_a_text_only_runtime_publishes_no_token_input(start_server) -> None:
    srv = start_server(scorer=TextOnlyScorer(tiny_spec(), ScorerSettings()), max_texts=8)
    with srv.client() as client:
        doc = client.get("/openapi.json").json()
        assert client.post("/score", json={"token_ids": [[1]]}).status_code == 422
    assert not request_validator(doc, "/score").is_valid({"token_ids": [[1]]})
    assert not request_validator(doc, "/classify").is_valid({"input": [1]})
    assert request_validator(doc, "/classify").is_valid({"input": ["a"]})


def test_schemathesis_positive_requests_to_score_and_classify_are_accepted(served) -> None:
    """Every request the schema calls valid gets a 2xx (``/get_reward``'s one-per-query rule is not one JSON
    Schema can state, so it is left to the test above)."""
    srv, _ = served
    schema = schemathesis.openapi.from_url(f"{srv.url}/openapi.json")
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path not in ("/score", "/classify"):
            continue

        @settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
        def case(c) -> None:
            c.call_and_validate(checks=[st_checks.not_a_server_error, st_checks.positive_data_acceptance])

        case()
