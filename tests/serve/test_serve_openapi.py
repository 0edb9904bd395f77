"""``/openapi.json`` tells the truth: what each endpoint takes, answers and refuses, checked against a
running server by hand (the three places a fuzzer found wrong) and by a bounded schemathesis run.
"""

from __future__ import annotations

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings

schemathesis = pytest.importorskip("schemathesis")
from schemathesis import GenerationMode  # noqa: E402
from schemathesis import checks as st_checks  # noqa: E402

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
    schema = schemathesis.openapi.from_url(f"{srv.url}/openapi.json")
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
