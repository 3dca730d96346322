"""Celery tasks: thin wrappers that parse, open one transaction, and call one
pipeline function. Arguments are keyword-only ids and plain data, never objects."""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import timedelta
from typing import Any

import redis.exceptions
import sqlalchemy.exc
from celery import Task
from pydantic import ValidationError

from memwell.db.tenancy import tenant_transaction
from memwell.deadletter import record_dead_letter
from memwell.pipeline.consolidate import consolidate_pending
from memwell.pipeline.persist import persist_turns
from memwell.pipeline.sweep import stale_pending_turns
from memwell.queues import Queue, TaskName
from memwell.turns import IngestPayload
from worker.celery_app import app
from worker.runtime import get_runtime

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

SWEEP_AFTER = timedelta(minutes=5)
SWEEP_BATCH = 1000


class MemwellTask(Task[Any, Any]):
    """Retries transient failures with backoff; a task that fails for good becomes a
    dead letter instead of vanishing into a log."""

    autoretry_for = TRANSIENT_ERRORS
    retry_backoff = 2
    retry_backoff_max = 120
    retry_jitter = True
    max_retries = 10
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
                tenant=tenant if isinstance(tenant, str) and 0 < len(tenant) <= 128 else None,
            )
    except Exception:  # the database may be the reason we are here
        log.exception("could not record dead letter for %s: %s", task_name, error)


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.INGEST_TURNS.value,
    soft_time_limit=30,
    time_limit=60,
)
def ingest_turns(self: MemwellTask, *, payload: dict[str, Any]) -> dict[str, int]:
    """Persist a batch of turns, then dispatch their consolidation."""
    try:
        parsed = IngestPayload.model_validate(payload)
    except ValidationError as exc:
        # A poison message: retrying cannot fix it. Keep it, and keep the worker alive.
        # Keep its tenant when it names one, so a user's erasure can find the letter.
        tenant = payload.get("tenant") if isinstance(payload, dict) else None
        _dead_letter(self.name, {"payload": payload}, f"invalid payload: {exc}", tenant)
        return {"rejected": 1, "persisted": 0}
    with tenant_transaction(get_runtime().tenant_sessions, parsed.tenant) as session:
        new_ids = persist_turns(session, parsed)
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
    with tenant_transaction(runtime.tenant_sessions, tenant) as session:
        report = consolidate_pending(
            session,
            runtime.embedder,
            tenant=tenant,
            turn_ids=turn_ids,
            limit=runtime.settings.embedding_batch_size,
        )
    return asdict(report)


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.SWEEP_PENDING.value,
    soft_time_limit=50,
    time_limit=60,
)
def sweep_pending(self: MemwellTask) -> dict[str, int]:
    """Re-dispatch consolidation for turns pending longer than SWEEP_AFTER."""
    runtime = get_runtime()
    with runtime.sessions.begin() as session:
        stale = stale_pending_turns(session, older_than=SWEEP_AFTER, limit=SWEEP_BATCH)
    step = runtime.settings.embedding_batch_size
    for tenant, ids in stale.items():
        for start in range(0, len(ids), step):
            consolidate_turns.apply_async(
                kwargs={"tenant": tenant, "turn_ids": ids[start : start + step]},
                queue=Queue.EMBED.value,
            )
    return {"redispatched": sum(len(ids) for ids in stale.values())}
