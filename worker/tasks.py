"""Celery tasks: thin wrappers that parse, open one transaction, and call one
pipeline function. Arguments are keyword-only ids and plain data, never objects."""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

import redis.exceptions
import sqlalchemy.exc
from celery import Task
from pydantic import ValidationError

from memwell import inbox
from memwell.deadletter import record_dead_letter
from memwell.pipeline.consolidate import consolidate_pending
from memwell.pipeline.persist import persist_turns
from memwell.queues import Queue, TaskName
from memwell.turns import IngestPayload
from worker.celery_app import app
from worker.runtime import get_redis, get_runtime

log = logging.getLogger(__name__)

# Worth retrying: the database or broker is briefly away. Anything else is a bug or
# bad data, and retrying would only delay the dead letter.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    sqlalchemy.exc.TimeoutError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ConnectionError,
    TimeoutError,
)


class MemwellTask(Task[Any, Any]):
    """Retries transient failures with backoff; a task that fails for good becomes a
    dead letter instead of vanishing into a log.

    Backoff doubles from 2 s up to 120 s, with full jitter (each wait is drawn from
    0..cap, so a herd of retries spreads out when Postgres comes back). Ten retries
    wait 0..606 s in total, which may be short of a long outage: that is fine for
    tasks whose input is already in Postgres (a consolidate task that gives up leaves
    its turns pending, and the sweeper re-dispatches them). `ingest_turns` overrides
    it: its payload lives only in the broker, so it never gives up on a transient
    error."""

    autoretry_for = TRANSIENT_ERRORS
    retry_backoff = 2
    retry_backoff_max = 120
    retry_jitter = True
    max_retries: int | None = 10
    acks_late = True

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        tenant = kwargs.get("tenant") or (kwargs.get("payload") or {}).get("tenant")
        _dead_letter(self.name, dict(kwargs), f"{type(exc).__name__}: {exc}", tenant)


def _dead_letter(task_name: str, payload: dict[str, Any], error: str, tenant: Any) -> None:
    try:
        with get_runtime().sessions.begin() as session:
            record_dead_letter(
                session,
                task_name=task_name,
                payload=payload,
                error=error,
                tenant=tenant if isinstance(tenant, str) else None,
            )
    except Exception:  # the database may be the reason we are here
        log.exception("could not record dead letter for %s: %s", task_name, error)


def _inbox_done(request_id: object) -> None:
    """The payload is persisted (or dead-lettered): the sweeper need not re-send it.
    Best effort: a leftover entry only costs one idempotent re-send."""
    if not isinstance(request_id, str):
        return
    try:
        inbox.done(get_redis(), request_id)
    except redis.exceptions.RedisError:
        log.warning("could not clear inbox entry %s; the sweeper will re-send it", request_id)


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.INGEST_TURNS.value,
    soft_time_limit=30,
    time_limit=60,
    # The payload exists nowhere but in this message: giving up would lose turns that
    # enqueue_turn acknowledged. Retry transient errors (Postgres down) until it is
    # back, every <= 60 s.
    max_retries=None,
    retry_backoff_max=60,
)
def ingest_turns(self: MemwellTask, *, payload: dict[str, Any]) -> dict[str, int]:
    """Persist a batch of turns, then dispatch their consolidation."""
    try:
        parsed = IngestPayload.model_validate(payload)
    except ValidationError as exc:
        # A poison message: retrying cannot fix it. Keep it, and keep the worker alive.
        _dead_letter(self.name, {"payload": payload}, f"invalid payload: {exc}", None)
        _inbox_done(payload.get("request_id") if isinstance(payload, dict) else None)
        return {"rejected": 1, "persisted": 0}
    with get_runtime().sessions.begin() as session:
        new_ids = persist_turns(session, parsed)
    _inbox_done(parsed.request_id)
    consolidate_turns.apply_async(
        kwargs={"tenant": parsed.tenant, "turn_ids": [t.id for t in parsed.turns]},
        queue=Queue.EMBED.value,
    )
    return {"rejected": 0, "persisted": len(new_ids)}


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.CONSOLIDATE_TURNS.value,
    soft_time_limit=120,
    time_limit=180,
)
def consolidate_turns(self: MemwellTask, *, tenant: str, turn_ids: list[str]) -> dict[str, int]:
    """Embed and store memories for pending turns (these first), in one batch."""
    runtime = get_runtime()
    with runtime.sessions.begin() as session:
        report = consolidate_pending(
            session,
            runtime.embedder,
            tenant=tenant,
            turn_ids=turn_ids,
            limit=runtime.settings.embedding_batch_size,
        )
    return asdict(report)
