"""schemathesis's `negative_data_rejection`, judging a fuzzed query as the server reads it.

A query value is text. schemathesis judges a "schema-violating" query parameter by the
value it generated, and for an array of strings it keeps that value: `turn_id` declared
as an array of strings, mutated to the integer 5, goes on the wire as `?turn_id=5`, which
is the valid one-item list `["5"]`; the API rightly accepts it, and the check called that
a schema-violating request accepted. The published schema is right (a turn id may well
be "5"), so the check is corrected here, not the schema: when every declared query
parameter, read back from the URL actually sent, is valid against its schema, nothing
schema-violating reached the server and the check passes. The same holds for a header
the fuzzer dropped or broke (the API key) where the test sends its own: the server got
the test's.
Anything it cannot read back exactly (a type other than string, integer, boolean or an
array of strings) goes to schemathesis's own check unchanged.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonschema
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import negative_data_rejection

INTEGER = re.compile(r"-?\d+")
BOOLEAN = {"true": True, "false": False}


class Unreadable(Exception):
    """A value whose server-side reading this module does not model."""


def read_as_server(texts: list[str], schema: dict[str, Any]) -> object:
    """The value a query parameter's texts become on the server, per its declared type."""
    if "$ref" in json.dumps(schema):
        raise Unreadable("$ref")
    kind = schema.get("type")
    if kind == "array" and schema.get("items", {}).get("type") == "string":
        return texts
    last = texts[-1]
    if kind == "string":
        return last
    if kind == "integer" and INTEGER.fullmatch(last):
        return int(last)
    if kind == "boolean" and last in BOOLEAN:
        return BOOLEAN[last]
    raise Unreadable(kind)


def query_valid_as_sent(sent_url: str, parameters: list[dict[str, Any]]) -> bool:
    """Whether the query of `sent_url` is valid for these OpenAPI query parameters."""
    sent = parse_qs(urlsplit(sent_url).query, keep_blank_values=True)
    for parameter in parameters:
        texts = sent.get(parameter["name"])
        if not texts:
            if parameter.get("required", False):
                return False
            continue
        try:
            value = read_as_server(texts, parameter["schema"])
        except Unreadable:
            return False
        if not jsonschema.Draft202012Validator(parameter["schema"]).is_valid(value):
            return False
    return True


def header_negation_replaced(case: Any, sent_headers: Any) -> bool:
    """Whether every header the fuzzer negated was replaced by the caller's own (the API
    key the test sends), so the negated value never reached the server."""
    mutations = getattr(case.meta.phase.data, "mutations", None) or ()
    in_headers = [m for m in mutations if m.parameter_location is ParameterLocation.HEADER]
    generated = case.headers or {}
    return bool(in_headers) and all(
        m.parameter is not None
        and sent_headers.get(m.parameter) is not None
        and sent_headers.get(m.parameter) != generated.get(m.parameter)
        for m in in_headers
    )


def negative_data_rejection_as_read(ctx: Any, response: Any, case: Any) -> bool | None:
    """`negative_data_rejection`, unless what was negated reached the server valid: the
    query as read from the URL sent, a header as the caller replaced it."""
    meta = case.meta
    negated = {loc for loc, c in (meta.components.items() if meta else ()) if c.mode.is_negative}
    sent = response.request
    if negated and negated <= {ParameterLocation.QUERY, ParameterLocation.HEADER}:
        query_ok = ParameterLocation.QUERY not in negated or query_valid_as_sent(
            sent.url, [p.definition for p in case.operation.query]
        )
        headers_ok = ParameterLocation.HEADER not in negated or header_negation_replaced(
            case, sent.headers
        )
        if query_ok and headers_ok:
            return None
    return negative_data_rejection(ctx, response, case)
