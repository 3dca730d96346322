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

from api.openapi import OPENAI_PATHS
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
from memwell.llm.upstream import UpstreamError

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
    *,
    path: str = "",
    **extra: Any,
) -> JSONResponse:
    body: dict[str, Any] = {"type": PROBLEM_BASE + code, "title": title, "status": status}
    if detail is not None:
        body["detail"] = detail
    body.update(extra)
    media_type = "application/problem+json"
    if path in OPENAI_PATHS:
        # The same problem, plus the member OpenAI's clients parse.
        message = detail if isinstance(detail, str) else title
        body["error"] = {"message": message, "type": code, "param": None, "code": code}
        media_type = "application/json"
    return JSONResponse(
        jsonable_encoder(body), status_code=status, media_type=media_type, headers=headers
    )


def _headers_for(exc: MemwellError) -> Mapping[str, str] | None:
    if isinstance(exc, Unauthorized):
        return {"WWW-Authenticate": 'Bearer realm="memwell"'}
    if isinstance(exc, RateLimited):
        return {"Retry-After": str(exc.retry_after_s)}
    return None


def status_of(exc: MemwellError) -> int:
    return next((s for t, s in STATUS_BY_ERROR.items() if isinstance(exc, t)), 500)


def problem_body(exc: Exception) -> dict[str, Any]:
    """The problem an error would have answered with, as a body alone: for a stream,
    whose status line went out before the error happened."""
    if not isinstance(exc, MemwellError):
        return {"type": PROBLEM_BASE + "internal", "title": "Internal error", "status": 500}
    return {
        "type": PROBLEM_BASE + exc.code, "title": type(exc).__name__,
        "status": status_of(exc), "detail": str(exc),
    }  # fmt: skip


async def _memwell_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MemwellError)
    status = status_of(exc)
    return problem(
        status, exc.code, type(exc).__name__, str(exc), headers=_headers_for(exc),
        path=request.url.path,
    )  # fmt: skip


async def _upstream_error(_: Request, exc: Exception) -> JSONResponse:
    """The model endpoint's own refusal, passed on with its status and Retry-After."""
    assert isinstance(exc, UpstreamError)
    headers = {"Retry-After": exc.retry_after} if exc.retry_after else None
    return JSONResponse(exc.body, status_code=exc.status, headers=headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")}
        for e in exc.errors()
    ]
    return problem(
        422, "invalid-input", "Request validation failed", errors=errors, path=request.url.path
    )


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = {
        400: "bad-request",
        404: "not-found",
        405: "method-not-allowed",
        413: "too-large",
    }.get(exc.status_code, "http-error")
    return problem(
        exc.status_code, code, str(exc.detail), headers=exc.headers, path=request.url.path
    )


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return problem(500, "internal", "Internal error")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(MemwellError, _memwell_error)
    app.add_exception_handler(UpstreamError, _upstream_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
