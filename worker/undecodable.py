"""Messages the worker cannot read as a task: kept as dead letters, never logged.

Celery's consumer handles a message it cannot decode (a body that is not UTF-8 or not
JSON), one in no known format, one naming an unregistered task, or an invalid one by
logging the whole body (a user's text, for an ingest message) and dropping it. A raw
producer (docs/enqueue-contract.md) can send any of these. This consumer keeps each as
a dead letter instead (its bytes as base64, with what the envelope says of them, within
the size cap and the bound of memwell/intake/raw_letters.py), and logs only the message
id, its size and the error's class, once a minute per kind of error with a count. The
message then leaves the queue as Celery would have removed it: acknowledged, or
rejected without requeue.

Such a letter names no tenant (nothing in it could be read), so a user's erasure
finds it only by its bytes: `memwell dlq list --payload` shows it to the operator. It
holds no task's arguments, so a replay skips it.

A raw item that is not even a message envelope never reaches this consumer: the
transport keeps it (worker/poison_items.py), through `store` here.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from celery.worker.consumer import Consumer
from sqlalchemy.orm import Session, sessionmaker

from memwell.core import stack
from memwell.core.log_throttle import LogThrottle
from memwell.core.metrics import DEAD_LETTERS_NOT_KEPT_TOTAL
from memwell.core.redaction import describe
from memwell.core.settings import get_settings
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.intake.raw_letters import keep_raw_letter

log = logging.getLogger(__name__)
#: A flood of unreadable messages logs one line per kind a minute, with a count.
throttled = LogThrottle(log)

#: The dead letter's task name for a message that could not be read as a task.
UNREADABLE_TASK = "memwell.unreadable_message"


def _task_name(message: Any) -> str:
    headers = message.headers if isinstance(message.headers, dict) else {}
    name = headers.get("task")
    return name if isinstance(name, str) and 0 < len(name) <= 200 else UNREADABLE_TASK


def _body_bytes(message: Any) -> bytes:
    body = message.body
    if isinstance(body, bytes):
        return body
    return str(body).encode("utf-8", "backslashreplace")


_sessions: tuple[int, sessionmaker[Session]] | None = None
_sessions_lock = threading.Lock()


def _letter_sessions() -> sessionmaker[Session]:
    """This process's sessions for letters (the consumer's; made after any fork, kept:
    a flood of poison must not pay a connection per item)."""
    global _sessions
    with _sessions_lock:
        if _sessions is None or _sessions[0] != os.getpid():
            engine = make_engine(stack.database_url(get_settings()), pool_size=1)
            _sessions = (os.getpid(), make_sessionmaker(engine))
        return _sessions[1]


def store(raw: bytes, *, task_name: str, error: str, details: Mapping[str, str]) -> str:
    """Keep `raw` as a dead letter, with `details`, within the size cap and the bound
    (memwell/intake/raw_letters.py); what became of it, for the log line."""
    settings = get_settings()
    try:
        with _letter_sessions().begin() as session:
            letter = keep_raw_letter(
                session, raw=raw, task_name=task_name, error=error, details=details,
                max_bytes=settings.dead_letter_raw_max_bytes,
                max_open=settings.dead_letter_raw_max_open,
            )  # fmt: skip
    except Exception as exc:  # the database may be down: the count and the log remain
        DEAD_LETTERS_NOT_KEPT_TOTAL.labels("unstorable").inc()
        throttled.log(
            logging.ERROR, ("unstorable", type(exc)),
            "could not keep an unreadable message (%d bytes): %s", len(raw), describe(exc),
        )  # fmt: skip
        return "could not be kept"
    if letter is None:
        throttled.log(
            logging.WARNING, "bound",
            "an unreadable message (%d bytes) was not kept: the open raw dead letters are at "
            "their bound, MEMWELL_DEAD_LETTER_RAW_MAX_OPEN=%d; `memwell dlq discard --raw` "
            "makes room",
            len(raw), settings.dead_letter_raw_max_open,
        )  # fmt: skip
        return "not kept (too many open)"
    return f"kept as dead letter {letter}"


def keep(message: Any, error: BaseException | None, why: str) -> None:
    """Record `message` as a dead letter and log that it was, without its content."""
    body = _body_bytes(message)
    message_id = (message.headers or {}).get("id") if isinstance(message.headers, dict) else None
    error_class = type(error).__name__ if error is not None else why
    details = {
        "content_type": str(message.content_type),
        "content_encoding": str(message.content_encoding),
        "message_id": str(message_id),
    }
    error_text = f"{why}: {describe(error) if error is not None else error_class}"
    outcome = store(body, task_name=_task_name(message), error=error_text, details=details)
    throttled.log(
        logging.ERROR, ("unreadable", why, error_class),
        "a message could not be read as a task (%s): id=%s, %d bytes, %s; %s",
        why, message_id, len(body), error_class, outcome,
    )  # fmt: skip


class KeepingConsumer(Consumer):
    """Celery's consumer, keeping what it cannot run instead of logging it."""

    def on_decode_error(self, message: Any, exc: BaseException) -> None:
        keep(message, exc, "undecodable body")
        message.ack()

    def on_unknown_message(self, body: Any, message: Any) -> None:
        keep(message, None, "unknown message format")
        message.reject_log_error(log, self.connection_errors)  # type: ignore[attr-defined]

    def on_unknown_task(self, body: Any, message: Any, exc: BaseException) -> None:
        keep(message, exc, "unregistered task")
        message.reject_log_error(log, self.connection_errors)  # type: ignore[attr-defined]

    def on_invalid_task(self, body: Any, message: Any, exc: BaseException) -> None:
        keep(message, exc, "invalid task message")
        message.reject_log_error(log, self.connection_errors)  # type: ignore[attr-defined]
