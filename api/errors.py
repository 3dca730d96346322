"""Every error leaves as application/problem+json (RFC 9457) with a stable `type`.

This is the one place that maps domain errors to HTTP.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from memwell.core.errors import (
    ConfigurationError,
    Conflict,
    Forbidden,
    InvalidCursor,
    InvalidInput,
    MemwellError,
    NotFound,
    RateLimited,
    ServiceUnavailable,
    TooLarge,
    Unauthorized,
)

log = logging.getLogger(__name__)

PROBLEM_BASE = "https://memwell.dev/problems/"
# Subclasses before their base: the first match wins.
STATUS_BY_ERROR: dict[type[MemwellError], int] = {
    InvalidCursor: 400,
    InvalidInput: 422,
    Conflict: 409,
    NotFound: 404,
    TooLarge: 413,
    Unauthorized: 401,
    Forbidden: 403,
    RateLimited: 429,
    ServiceUnavailable: 503,
    ConfigurationError: 500,
}


def problem(
    status: int,
    code: str,
    title: str,
    detail: Any = None,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    body: dict[str, Any] = {"type": PROBLEM_BASE + code, "title": title, "status": status}
    if detail is not None:
        body["detail"] = detail
    body.update(extra)
    return JSONResponse(
        jsonable_encoder(body),
        status_code=status,
        media_type="application/problem+json",
        headers=headers,
    )


def _headers_for(exc: MemwellError) -> Mapping[str, str] | None:
    if isinstance(exc, Unauthorized):
        return {"WWW-Authenticate": 'Bearer realm="memwell"'}
    if isinstance(exc, RateLimited):
        return {"Retry-After": str(exc.retry_after_s)}
    return None


async def _memwell_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MemwellError)
    status = next((s for t, s in STATUS_BY_ERROR.items() if isinstance(exc, t)), 500)
    return problem(status, exc.code, type(exc).__name__, str(exc), headers=_headers_for(exc))


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")}
        for e in exc.errors()
    ]
    return problem(422, "invalid-input", "Request validation failed", errors=errors)


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = {
        400: "bad-request",
        404: "not-found",
        405: "method-not-allowed",
        413: "too-large",
    }.get(exc.status_code, "http-error")
    return problem(exc.status_code, code, str(exc.detail), headers=exc.headers)


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return problem(500, "internal", "Internal error")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(MemwellError, _memwell_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
