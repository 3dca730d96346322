"""No request carries an endpoint or a credential the server would use: every field of
every operation's parameters and body, as the OpenAPI document publishes them, is
named and none is a URL, host, key or file. Outbound endpoints are the operator's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fastapi.testclient import TestClient

#: The words of a field that reaches the network, the filesystem or a secret.
OUTBOUND = {
    "url", "uri", "endpoint", "host", "port", "base", "key", "apikey", "secret", "password",
    "credential", "credentials", "auth", "authorization", "token", "path", "file", "dir",
    "webhook", "callback", "proxy", "server",
}  # fmt: skip
#: Names with one of those words that are plain data.
KNOWN_DATA = {"token_budget", "idempotency-key"}


def _outbound(name: str) -> bool:
    return name.lower() not in KNOWN_DATA and bool(
        OUTBOUND & set(re.split(r"[_\-.]", name.lower()))
    )


def _fields(schema: dict[str, Any], components: dict[str, Any], seen: set[str]) -> Iterator[str]:
    if ref := schema.get("$ref"):
        name = ref.rsplit("/", 1)[-1]
        if name not in seen:
            seen.add(name)
            yield from _fields(components[name], components, seen)
        return
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []):
            yield from _fields(sub, components, seen)
    for sub in (schema.get("items"), schema.get("additionalProperties")):
        if isinstance(sub, dict):
            yield from _fields(sub, components, seen)
    for name, sub in schema.get("properties", {}).items():
        yield name
        yield from _fields(sub, components, seen)


def test_no_request_field_names_an_endpoint_or_a_credential(api: TestClient) -> None:
    doc = api.get("/openapi.json").json()
    components = doc["components"]["schemas"]
    found: dict[str, set[str]] = {}
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            names = {p["name"] for p in operation.get("parameters", [])}
            for content in operation.get("requestBody", {}).get("content", {}).values():
                names |= set(_fields(content["schema"], components, set()))
            found[f"{method.upper()} {path}"] = names
    assert "to" in found["POST /v1/admin/reembed"]  # the walk reaches request bodies
    suspicious = {route: sorted(n for n in names if _outbound(n)) for route, names in found.items()}
    assert {r: n for r, n in suspicious.items() if n} == {}
