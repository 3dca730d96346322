"""An exception's text never reaches a log with the values it carries: engines hide a
statement's parameters, and the log handler every process installs
(memwell/core/logs.py) rewrites a record that carries an exception, Celery's task
failure line included, into the exception's kind and frames."""

from __future__ import annotations

import io
import logging
import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DataError, StatementError

from memwell.core.redaction import RedactExceptions
from memwell.db.engine import make_engine

# Celery's own (celery/app/trace.py): the exception's repr sits in the arguments.
CELERY_FAILURE = "Task %(name)s[%(id)s] %(description)s: %(exc)s"


def _handler_output(record_exception: BaseException) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactExceptions())
    logger = logging.getLogger(f"memwell.test.{uuid.uuid4().hex}")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        raise record_exception
    except Exception as exc:
        context = {"name": "memwell.consolidate_turns", "id": "abc", "exc": repr(exc),
                   "description": "raised unexpected"}  # fmt: skip
        logger.log(logging.ERROR, CELERY_FAILURE, context, exc_info=True)
        logger.exception("turn t1 failed analysis")
    return stream.getvalue()


def test_a_task_failure_is_logged_by_kind_and_frames_only() -> None:
    canary = f"CANARY{uuid.uuid4().hex}"
    statement = StatementError("insert failed", "INSERT INTO memories VALUES (%s)",
                               (canary,), ValueError(canary))  # fmt: skip
    for exc in (statement, ValueError(f"could not read {canary}")):
        out = _handler_output(exc)
        assert "Task memwell.consolidate_turns[abc] raised unexpected: " in out
        assert "turn t1 failed analysis" in out and "_handler_output" in out  # the frames
        assert type(exc).__name__ in out
        assert canary not in out


def test_engines_hide_statement_parameters(database_url: str) -> None:
    canary = f"CANARY{uuid.uuid4().hex}"
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.connect() as connection, pytest.raises(DataError) as failed:
            # Division by zero: the server's own message does not quote the value.
            connection.execute(text("SELECT CAST(:value AS text), 1 / 0"), {"value": canary})
    finally:
        engine.dispose()
    assert "hidden due to hide_parameters" in str(failed.value)
    assert canary not in str(failed.value)
