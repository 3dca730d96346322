"""What of an exception may reach a log: its kind and what is safe of it, never the
values it carries.

A pydantic error's text quotes the input (`input_value='...'`), and SQLAlchemy's
quotes the statement's parameters (`[parameters: ...]`): either can be a user's
message. Every process (API, workers, background tasks) describes an error with
`describe` before it logs one, and the log handler of every process
(memwell/core/logs.py) rewrites what still carries an exception (a library's own
`log.exception`, Celery's "Task ... raised unexpected: ...") with `RedactExceptions`.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping

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


def redacted(exc: BaseException) -> str:
    """`exc` described, and the frames of its traceback (code, not data)."""
    return f"{describe(exc)}\n{''.join(traceback.format_tb(exc.__traceback__))}"


class RedactExceptions(logging.Filter):
    """Rewrites a record that carries an exception into its redacted form. A record
    whose arguments hold the exception's text under `exc` (Celery's task failure line)
    gets the description there instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            if isinstance(record.args, Mapping) and "exc" in record.args:
                record.args = {**record.args, "exc": describe(exc)}
            record.msg = f"{record.getMessage().rstrip()}: {redacted(exc)}"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        return True
