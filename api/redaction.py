"""What of an exception may reach a log: its kind and where it happened, never the
values it carries.

A pydantic error's text quotes the input (`input_value='...'`), and SQLAlchemy's
quotes the statement's parameters (`[parameters: ...]`): either can be a user's
message. So an error is logged as its type plus what is safe of it (the fields and
reasons of a validation error, a database error's SQLSTATE), with the traceback's
frames (code, not data).

The server logs an exception the app let through too (uvicorn's "Exception in ASGI
application", after Starlette's 500): `install` puts the same redaction on that
logger.
"""

from __future__ import annotations

import logging
import traceback

import kombu.exceptions
import psycopg_pool
import pydantic
import redis.exceptions
import sqlalchemy.exc

#: Errors whose text names a host, a port or a pool, and nothing a user sent.
_PLAIN: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    kombu.exceptions.OperationalError,
    psycopg_pool.PoolTimeout,
)


def describe(exc: BaseException) -> str:
    """`exc`'s type and the parts of it that never carry user data."""
    name = type(exc).__name__
    if isinstance(exc, pydantic.ValidationError):
        fields = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
            for e in exc.errors(include_input=False, include_url=False)
        )
        return f"{name}: {fields}"
    if isinstance(exc, sqlalchemy.exc.StatementError):
        orig = exc.orig
        sqlstate = getattr(orig, "sqlstate", None)
        return f"{name} ({type(orig).__name__}, SQLSTATE {sqlstate})"
    if isinstance(exc, _PLAIN):
        return f"{name}: {exc}"
    return name


def _redacted(exc: BaseException) -> str:
    return f"{describe(exc)}\n{''.join(traceback.format_tb(exc.__traceback__))}"


def log_error(log: logging.Logger, what: str, exc: BaseException) -> None:
    """Log `exc` under `what` as its description and the frames of its traceback."""
    log.error("%s: %s", what, _redacted(exc))


class RedactExceptions(logging.Filter):
    """Rewrites a record that carries an exception into its redacted form."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            record.msg = f"{record.getMessage().rstrip()}: {_redacted(record.exc_info[1])}"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        return True


#: Loggers the server writes unhandled exceptions to.
SERVER_LOGGERS = ("uvicorn.error", "uvicorn.asgi")


def install() -> None:
    """Redact the exceptions the server logs (idempotent)."""
    for name in SERVER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactExceptions) for f in logger.filters):
            logger.addFilter(RedactExceptions())
