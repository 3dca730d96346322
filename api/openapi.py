"""The published OpenAPI document, with every error response described as it is
sent: application/problem+json, one `Problem` schema. Fuzzers and client generators
then see exactly what the service answers."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "type": "object",
    "required": ["type", "title", "status"],
    "properties": {
        "type": {"type": "string", "description": "https://memwell.dev/problems/<code>"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {},
        "errors": {"type": "array", "items": {"type": "object"}},
    },
}
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}

#: What any authenticated /v1 operation may answer besides its success.
COMMON_ERRORS = {
    "400": "Malformed request (e.g. a body that is not UTF-8)",
    "401": "Missing, unknown or revoked API key",
    "403": "The key lacks the scope this operation needs",
    "404": "Not found for this tenant",
    "413": "Over a size limit",
    "422": "Invalid input",
    "429": "Rate limited; see Retry-After",
    "503": "A backing service is unavailable, or (`overloaded`) this process is serving "
    "MEMWELL_API_MAX_INFLIGHT such requests; see Retry-After",
}

#: What the HTTP server itself answers, before any route (api/server.py): always
#: problem+json, the OpenAI-compatible door included.
SERVER_ERRORS = {
    "431": "The request line and headers are over MEMWELL_API_MAX_HEADER_BYTES (a long "
    "query string counts); the connection is closed",
}


#: The OpenAI-compatible door answers errors in OpenAI's shape (api/errors.py), the
#: upstream's own errors included.
OPENAI_ERROR_SCHEMA: dict[str, Any] = {
    "title": "OpenAIError",
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message"],
            "properties": {"message": {"type": "string"}},
        }
    },
}
OPENAI_PATHS = ("/v1/chat/completions", "/v1/models")


def _problem_response(description: str, path: str = "") -> dict[str, Any]:
    if path in OPENAI_PATHS:
        schema = {"$ref": "#/components/schemas/OpenAIError"}
        return {"description": description, "content": {"application/json": {"schema": schema}}}
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": PROBLEM_REF}},
    }


def _not_nullable(parameter: dict[str, Any]) -> None:
    """An optional query parameter is absent, never null (a query string has no null):
    say so with `required: false` alone, not with `anyOf: [X, null]`, which also made
    fuzzers send a one-element array, indistinguishable on the wire from a valid X."""
    schema = parameter.get("schema", {})
    options = schema.get("anyOf")
    if parameter.get("in") != "query" or not isinstance(options, list):
        return
    kept = [o for o in options if o.get("type") != "null"]
    if len(kept) == 1 and len(kept) < len(options):
        rest = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
        parameter["schema"] = {**kept[0], **rest}


def build_openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    doc = get_openapi(title=app.title, version=app.version, routes=app.routes)
    doc.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
    doc["components"]["schemas"]["OpenAIError"] = OPENAI_ERROR_SCHEMA
    for path, operations in doc.get("paths", {}).items():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                _not_nullable(parameter)
            responses = operation.setdefault("responses", {})
            if path.startswith("/v1/"):
                for status, description in COMMON_ERRORS.items():
                    responses[status] = _problem_response(description, path)
                for status, description in SERVER_ERRORS.items():
                    responses[status] = _problem_response(description)
                for status in ("429", "503"):
                    responses[status]["headers"] = {
                        "Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}
                    }
            elif "422" in responses:
                responses["422"] = _problem_response(COMMON_ERRORS["422"])
    for name in ("HTTPValidationError", "ValidationError"):
        doc["components"]["schemas"].pop(name, None)
    app.openapi_schema = doc
    return doc


def install_openapi(app: FastAPI) -> None:
    app.openapi = lambda: build_openapi(app)  # type: ignore[method-assign]
