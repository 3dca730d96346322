"""Enqueue turns from any Python app: only the broker URL, no HTTP hop, no database.

    import memwell
    memwell.enqueue_turn(user_id="u1", session_id="s1", content="I moved to Lisbon.")

The task is sent by its stable name (`memwell.ingest_turns`), so the producer needs
none of the worker's code. A client turn id makes a resend harmless.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from celery import Celery

from memwell import stack
from memwell.queues import Queue, TaskName
from memwell.settings import get_settings
from memwell.turns import IngestPayload, TurnIn

_producers: dict[str, Celery] = {}
_producers_lock = threading.Lock()


def producer_app(broker_url: str) -> Celery:
    """A minimal Celery app used only to send tasks; one per broker URL per process."""
    with _producers_lock:
        app = _producers.get(broker_url)
        if app is None:
            app = Celery("memwell-producer", broker=broker_url, set_as_current=False)
            app.conf.update(
                task_serializer="json",
                broker_connection_retry_on_startup=True,
                broker_transport_options={
                    "visibility_timeout": get_settings().visibility_timeout_s
                },
            )
            _producers[broker_url] = app
        return app


def send_payload(payload: IngestPayload, *, broker_url: str | None = None) -> None:
    """Send one ingest task carrying the payload's turns."""
    url = broker_url or stack.redis_url(get_settings())
    producer_app(url).send_task(
        TaskName.INGEST_TURNS,
        kwargs={"payload": payload.model_dump(mode="json")},
        queue=Queue.INGEST,
    )


def enqueue_turn(
    *,
    user_id: str,
    session_id: str,
    content: str,
    role: str = "user",
    turn_id: str | None = None,
    created_at: datetime | None = None,
    metadata: Mapping[str, Any] | None = None,
    tenant: str | None = None,
    broker_url: str | None = None,
) -> str:
    """Enqueue one turn for consolidation and return its id (the idempotency key)."""
    fields: dict[str, Any] = {
        "user_id": user_id,
        "session_id": session_id,
        "content": content,
        "role": role,
        "created_at": created_at,
        "metadata": dict(metadata or {}),
    }
    if turn_id is not None:
        fields["id"] = turn_id
    return enqueue_turns([fields], tenant=tenant, broker_url=broker_url)[0]


def enqueue_turns(
    turns: Iterable[TurnIn | Mapping[str, Any]],
    *,
    tenant: str | None = None,
    broker_url: str | None = None,
    chunk_size: int = 100,
) -> list[str]:
    """Validate all turns first (so a bad one sends nothing), then send them in
    chunks of `chunk_size` turns per task. Returns the turn ids in input order."""
    validated = [t if isinstance(t, TurnIn) else TurnIn.model_validate(t) for t in turns]
    # Stamp the event time now, not at persist: an erasure drops queued turns by
    # comparing their event time with its own, and the queue may be long.
    now = datetime.now(UTC)
    validated = [t if t.created_at else t.model_copy(update={"created_at": now}) for t in validated]
    resolved_tenant = tenant or get_settings().default_tenant
    for start in range(0, len(validated), chunk_size):
        payload = IngestPayload(tenant=resolved_tenant, turns=validated[start : start + chunk_size])
        send_payload(payload, broker_url=broker_url)
    return [t.id for t in validated]
