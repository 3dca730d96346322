"""Enqueue turns from any Python app: only the broker URL, no HTTP hop, no database.

    import memwell
    memwell.enqueue_turn(user_id="u1", session_id="s1", content="I moved to Lisbon.")

The task is sent by its stable name (`memwell.ingest_turns`), so the producer needs
none of the worker's code. A client turn id makes a resend harmless.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from itertools import islice
from typing import Any, Final

import orjson
from celery import Celery
from pydantic import TypeAdapter, ValidationError
from pydantic_core import InitErrorDetails

from memwell.core import stack
from memwell.core.logs import current_request_id
from memwell.core.queues import TASK_QUEUES, Queue, TaskName, pipeline_queue
from memwell.core.settings import get_settings
from memwell.intake import broker as broker_publish
from memwell.intake import redis_inbox as inbox
from memwell.intake.turns import IngestPayload, TurnIn

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


def send_payloads(payloads: list[IngestPayload], *, broker_url: str | None = None) -> None:
    """Send one ingest task per payload."""
    send_payload_json([p.model_dump_json().encode() for p in payloads], broker_url=broker_url)


def send_payload_json(bodies: list[bytes], *, broker_url: str | None = None) -> None:
    """Send one ingest task per payload, each given as its JSON.

    On Redis, each payload is also kept in the inbox (memwell/intake/redis_inbox.py) under its task
    id until a worker has persisted it, and the inbox entries and the messages go in
    one MULTI: one round trip, and never a message without its inbox copy."""
    if not bodies:
        return
    url = broker_url or stack.redis_url(get_settings())
    if not broker_publish.supports(url):
        app = producer_app(url)
        for body in bodies:
            app.send_task(
                TaskName.INGEST_TURNS,
                kwargs={"payload": orjson.loads(body)},
                queue=Queue.INGEST,
            )
        return
    messages = [
        broker_publish.task_message(TaskName.INGEST_TURNS, b'{"payload":' + b + b"}", Queue.INGEST)
        for b in bodies
    ]
    client = broker_publish.publisher(url).client
    with client.pipeline(transaction=True) as pipe:
        now = time.time()
        for (task_id, _), body in zip(messages, bodies, strict=True):
            inbox.stage(pipe, task_id, body, now=now)
        # LPUSH m1 m2 leaves m1 at the tail, where BRPOP consumes first: FIFO.
        pipe.lpush(Queue.INGEST.value, *[m for _, m in messages])
        pipe.execute()


def resend_from_inbox(task_id: str, body: bytes, *, broker_url: str) -> None:
    """Re-send a payload the inbox still holds, under its original task id, so the
    worker that persists it clears that same inbox entry."""
    message = broker_publish.task_message(
        TaskName.INGEST_TURNS, b'{"payload":' + body + b"}", Queue.INGEST, task_id=task_id
    )
    broker_publish.publisher(broker_url).client.lpush(Queue.INGEST.value, message[1])


def send_payload(payload: IngestPayload, *, broker_url: str | None = None) -> None:
    """Send one ingest task carrying the payload's turns."""
    send_payloads([payload], broker_url=broker_url)


def send_task(task_name: str, kwargs: dict[str, Any], *, broker_url: str | None = None) -> None:
    """Send any Memwell task by its stable name to its usual queue (dead-letter replay)."""
    url = broker_url or stack.redis_url(get_settings())
    queue = TASK_QUEUES.get(TaskName(task_name), Queue.INGEST) if _known(task_name) else None
    producer_app(url).send_task(task_name, kwargs=kwargs, queue=(queue or Queue.INGEST).value)


def _known(task_name: str) -> bool:
    return task_name in {t.value for t in TaskName}


def send_summarize(
    *,
    tenant: str,
    user_id: str,
    session_id: str,
    turn_ids: list[str],
    broker_url: str | None = None,
) -> None:
    """Ask the workers to fold turns evicted from a session buffer into its summary."""
    settings = get_settings()
    url = broker_url or stack.redis_url(settings)
    producer_app(url).send_task(
        TaskName.SUMMARIZE_SESSION,
        kwargs={
            "tenant": tenant,
            "user_id": user_id,
            "session_id": session_id,
            "turn_ids": turn_ids,
        },
        queue=pipeline_queue(settings.pipeline_uses_llm, local=Queue.INGEST),
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
    request_id: str | None = None,
) -> list[str]:
    """Validate all turns first (so a bad one sends nothing; the error names it by its
    index), then send them in chunks of `chunk_size` turns per task. Returns the turn
    ids in input order.

    `request_id` (default: the current request's) goes into the payload, so the
    worker's log lines for these turns carry it."""
    # Stamp the event time now, not at persist: an erasure drops queued turns by
    # comparing their event time with its own, and the queue may be long.
    received_at = datetime.now(UTC)
    resolved_tenant = tenant or get_settings().default_tenant
    resolved_request_id = request_id or current_request_id()
    ids: list[str] = []
    bodies: list[bytes] = []
    # Each chunk becomes JSON before the next is validated, so only one chunk's models
    # are ever alive. Holding a whole batch of models triggers full garbage
    # collections, which in a sizeable process cost more than the enqueue itself.
    for first, chunk in _chunks(turns, chunk_size):
        validated = _validate(chunk, received_at=received_at, first=first)
        payload = IngestPayload(
            tenant=resolved_tenant, turns=validated, request_id=resolved_request_id
        )
        ids.extend(t.id for t in validated)
        bodies.append(payload.model_dump_json().encode())
    send_payload_json(bodies, broker_url=broker_url)
    return ids


_TURN_LIST: Final = TypeAdapter(list[TurnIn])


def _chunks(
    turns: Iterable[TurnIn | Mapping[str, Any]], size: int
) -> Iterator[tuple[int, list[TurnIn | Mapping[str, Any]]]]:
    """(index of its first turn, chunk) for consecutive chunks of `size` turns."""
    if size < 1:
        raise ValueError("chunk_size must be at least 1")
    it = iter(turns)
    first = 0
    while chunk := list(islice(it, size)):
        yield first, chunk
        first += len(chunk)


def _validate(
    chunk: list[TurnIn | Mapping[str, Any]], *, received_at: datetime, first: int
) -> list[TurnIn]:
    """The chunk's turns validated in one call, with their event time defaulting to
    `received_at`. Errors name each turn by its index in the whole batch."""
    try:
        return _TURN_LIST.validate_python([_received(t, received_at) for t in chunk])
    except ValidationError as exc:
        raise _renumbered(exc, first) from None


def _received(
    turn: TurnIn | Mapping[str, Any], received_at: datetime
) -> TurnIn | Mapping[str, Any]:
    """The turn with `created_at` set to `received_at` when it has none; anything
    that is not a turn at all is left for validation to refuse."""
    if isinstance(turn, TurnIn):
        return turn if turn.created_at else turn.model_copy(update={"created_at": received_at})
    if isinstance(turn, Mapping) and turn.get("created_at") is None:
        return {**turn, "created_at": received_at}
    return turn


def _renumbered(exc: ValidationError, first: int) -> ValidationError:
    """`exc` (from validating one chunk) with each error located by its turn's index in
    the whole batch rather than in the chunk."""
    errors: list[InitErrorDetails] = []
    for e in exc.errors():
        index, *field = e["loc"]
        error = InitErrorDetails(type=e["type"], loc=(first + int(index), *field), input=e["input"])
        if "ctx" in e:
            error["ctx"] = e["ctx"]
        errors.append(error)
    return ValidationError.from_exception_data("turns", errors)
