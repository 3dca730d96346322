"""The one check of an application/problem+json error response."""

from __future__ import annotations

from typing import Any

import httpx

PROBLEM = "application/problem+json"


def assert_problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The response is a problem of `status` whose type ends with `code`; its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    assert body["type"].endswith("/" + code) and body["status"] == status
    return body
