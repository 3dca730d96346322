"""Every error leaves as application/problem+json (RFC 9457) with a stable `type`.

This is the one place that maps domain errors to HTTP. A lost connection to Redis or
Postgres, raised by whichever layer met it, is a 503 with Retry-After here (the
client retries the same request), never a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kombu.exceptions
import psycopg
import psycopg_pool
import redis.exceptions
import sqlalchemy.exc
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.openapi import OPENAI_PATHS
from api.redaction import describe, log_error
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
        # The same problem, plus the member OpenAI's clients parse; an invalid request
        # is OpenAI's 400, which its clients raise as BadRequestError.
        if status == 422:
            status = body["status"] = 400
        message = detail if isinstance(detail, str) else title
        if errors := extra.get("errors"):
            message = f"{message}: " + "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors
            )
        body["error"] = {"message": message, "type": code, "param": None, "code": code}
        media_type = "application/json"
    return JSONResponse(
        jsonable_encoder(body), status_code=status, media_type=media_type, headers=headers
    )


def _headers_for(exc: MemwellError) -> Mapping[str, str] | None:
    if isinstance(exc, Unauthorized):
        return {"WWW-Authenticate": 'Bearer realm="memwell"'}
    if isinstance(exc, RateLimited | ServiceUnavailable):
        return {"Retry-After": str(exc.retry_after_s)}
    return None


#: The classes a backing service's connectivity failure arrives as; `unavailable`
#: decides for the ones that also carry other failures (a constraint violation is a
#: DBAPIError too).
BACKING_SERVICE_ERRORS: tuple[type[Exception], ...] = (
    redis.exceptions.ConnectionError,  # BusyLoadingError, MaxConnectionsError too
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,
    sqlalchemy.exc.DBAPIError,
    sqlalchemy.exc.TimeoutError,  # the engine's pool is exhausted
    psycopg.Error,
    psycopg_pool.PoolTimeout,
    kombu.exceptions.OperationalError,
)

#: SQLSTATE classes and codes that mean "no usable connection": connection exception,
#: shutting down / starting up, too many connections.
_LOST_SQLSTATES = ("08", "57P01", "57P02", "57P03", "53300")


def _lost_postgres(exc: BaseException | None) -> bool:
    if isinstance(exc, psycopg_pool.PoolTimeout | psycopg.InterfaceError):
        return True
    if isinstance(exc, psycopg.OperationalError):
        # No SQLSTATE: the client itself lost (or never had) the connection.
        return exc.sqlstate is None or exc.sqlstate.startswith(_LOST_SQLSTATES)
    return False


def unavailable(exc: BaseException) -> ServiceUnavailable | None:
    """The 503 a connectivity failure of Redis, Postgres or the broker stands for;
    None for any other error."""
    if isinstance(exc, ServiceUnavailable):
        return exc
    # ReadOnlyError: a server demoted to replica by a failover, still in a pool.
    if isinstance(
        exc,
        redis.exceptions.ConnectionError
        | redis.exceptions.TimeoutError
        | redis.exceptions.ReadOnlyError,
    ):
        return ServiceUnavailable("Redis is unavailable; retry later")
    if isinstance(exc, kombu.exceptions.OperationalError):
        return ServiceUnavailable("the broker is unavailable; retry later")
    if isinstance(exc, sqlalchemy.exc.TimeoutError):
        return ServiceUnavailable("Postgres connections are exhausted; retry later")
    if isinstance(exc, sqlalchemy.exc.DBAPIError):
        lost = exc.connection_invalidated or _lost_postgres(exc.orig)
        if lost or isinstance(exc, sqlalchemy.exc.InterfaceError):
            return ServiceUnavailable("Postgres is unavailable; retry later")
        return None
    if _lost_postgres(exc):
        return ServiceUnavailable("Postgres is unavailable; retry later")
    return None


def status_of(exc: MemwellError) -> int:
    return next((s for t, s in STATUS_BY_ERROR.items() if isinstance(exc, t)), 500)


def problem_body(exc: Exception) -> dict[str, Any]:
    """The problem an error would have answered with, as a body alone: for a stream,
    whose status line went out before the error happened."""
    exc = unavailable(exc) or exc
    if not isinstance(exc, MemwellError):
        return {"type": PROBLEM_BASE + "internal", "title": "Internal error", "status": 500}
    return {
        "type": PROBLEM_BASE + exc.code, "title": type(exc).__name__,
        "status": status_of(exc), "detail": str(exc),
    }  # fmt: skip


def problem_for(
    exc: MemwellError, *, path: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    """The response a domain error answers with, wherever it is raised (a handler, or
    a middleware in front of the app), plus any `headers`."""
    return problem(
        status_of(exc), exc.code, type(exc).__name__, str(exc),
        headers={**(_headers_for(exc) or {}), **(headers or {})}, path=path, **extra,
    )  # fmt: skip


async def _memwell_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MemwellError)
    return problem_for(exc, path=request.url.path)


async def _backing_service_error(request: Request, exc: Exception) -> JSONResponse:
    """Redis or Postgres out of reach: 503. Anything else of the same classes goes on
    to the handler of unexpected errors."""
    mapped = unavailable(exc)
    if mapped is None:
        raise exc
    log.warning("backing service unavailable: %s", describe(exc))
    return await _memwell_error(request, mapped)


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
        408: "request-timeout",
        413: "too-large",
    }.get(exc.status_code, "http-error")
    return problem(
        exc.status_code, code, str(exc.detail), headers=exc.headers, path=request.url.path
    )


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log_error(log, "unhandled error", exc)
    return problem(500, "internal", "Internal error")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(MemwellError, _memwell_error)
    app.add_exception_handler(UpstreamError, _upstream_error)
    for error_class in BACKING_SERVICE_ERRORS:
        app.add_exception_handler(error_class, _backing_service_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
