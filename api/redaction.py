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

from memwell.core.redaction import RedactExceptions, describe, redacted

__all__ = ["RedactExceptions", "describe", "install", "log_error"]


def log_error(log: logging.Logger, what: str, exc: BaseException) -> None:
    """Log `exc` under `what` as its description and the frames of its traceback."""
    log.error("%s: %s", what, redacted(exc))


#: Loggers the server writes unhandled exceptions to.
SERVER_LOGGERS = ("uvicorn.error", "uvicorn.asgi")


def install() -> None:
    """Redact the exceptions the server logs (idempotent)."""
    for name in SERVER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactExceptions) for f in logger.filters):
            logger.addFilter(RedactExceptions())
