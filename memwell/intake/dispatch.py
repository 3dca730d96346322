"""The one module that sends work to the broker.

Every task Memwell sends goes out from here, by its stable name (memwell/core/queues.py),
so a producer needs none of the worker's code: ingest payloads (from `enqueue_turns`
and the API), consolidation of persisted turns (the outbox, the ingest task, the
sweeper), summary requests (the chat path), re-sends from the Redis inbox, and replays
of dead letters. Ingest payloads on a Redis broker skip Celery's producer and go out
as one MULTI with their inbox copies (memwell/intake/task_message.py says why).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import orjson
import redis.asyncio
from celery import Celery

from memwell.core import stack
from memwell.core.errors import ServiceUnavailable
from memwell.core.logs import current_request_id
from memwell.core.queues import TASK_QUEUES, Queue, TaskName, kombu_queues, pipeline_queue
from memwell.core.redis_target import celery_broker
from memwell.core.settings import get_settings
from memwell.intake import redis_inbox, task_message
from memwell.intake.turns import IngestPayload

_producers: dict[str, Celery] = {}
_producers_lock = threading.Lock()


def producer_app(broker_url: str) -> Celery:
    """A minimal Celery app used only to send tasks; one per broker URL per process."""
    with _producers_lock:
        app = _producers.get(broker_url)
        if app is None:
            url, sentinel_options = celery_broker(broker_url)
            app = Celery("memwell-producer", broker=url, set_as_current=False)
            app.conf.update(
                task_serializer="json",
                broker_connection_retry_on_startup=True,
                broker_transport_options={
                    "visibility_timeout": get_settings().visibility_timeout_s,
                    **sentinel_options,
                },
            )
            _producers[broker_url] = app
        return app


def forget_producer(broker_url: str) -> None:
    """Close and drop the producer of `broker_url`: its pooled connections belong to a
    server that is gone (a throwaway stack stopped; the next may reuse its port)."""
    with _producers_lock:
        app = _producers.pop(broker_url, None)
    if app is not None:
        app.close()


def _url(broker_url: str | None) -> str:
    return broker_url or stack.redis_url(get_settings())


def send_ingest(payloads: list[IngestPayload], *, broker_url: str | None = None) -> None:
    """One ingest task per payload."""
    send_ingest_json([p.model_dump_json().encode() for p in payloads], broker_url=broker_url)


def send_ingest_json(bodies: list[bytes], *, broker_url: str | None = None) -> None:
    """One ingest task per payload, each given as its JSON.

    On Redis, each payload is also kept in the inbox (memwell/intake/redis_inbox.py)
    under its task id until a worker has persisted it; the inbox entries and the
    messages go in one MULTI: one round trip, and never a message without its copy."""
    if not bodies:
        return
    url = _url(broker_url)
    if not task_message.supports(url):
        app = producer_app(url)
        for body in bodies:
            app.send_task(
                TaskName.INGEST_TURNS, kwargs={"payload": orjson.loads(body)}, queue=Queue.INGEST
            )
        return
    messages = _ingest_messages(bodies)
    client = task_message.publisher(url).client
    acks = get_settings().resolved_replica_acks(url)
    with client.pipeline(transaction=not acks) as pipe:
        _stage_durably(pipe, messages, bodies, acks=acks)
        replies = pipe.execute()
    _check_acks(replies, acks=acks)


async def send_ingest_async(
    client: redis.asyncio.Redis, payloads: list[IngestPayload], *, broker_url: str
) -> None:
    """`send_ingest` on the caller's asyncio client of the Redis broker at `broker_url`:
    the same MULTI, on the event loop (the chat path would otherwise hand each send to a
    thread, whose sync Redis client then competes with the loop for the GIL)."""
    bodies = [p.model_dump_json().encode() for p in payloads]
    if not bodies:
        return
    acks = get_settings().resolved_replica_acks(broker_url)
    async with client.pipeline(transaction=not acks) as pipe:
        _stage_durably(pipe, _ingest_messages(bodies), bodies, acks=acks)
        replies = await pipe.execute()
    _check_acks(replies, acks=acks)


def _stage_durably(
    pipe: redis_inbox.AnyPipeline,
    messages: list[tuple[str, bytes]],
    bodies: list[bytes],
    *,
    acks: int,
) -> None:
    """The inbox copies and the messages; with `acks`, then `WAIT acks`.

    WAIT counts the replicas that hold this connection's writes, so it must follow
    them on the same connection: a plain pipeline, with the MULTI spelled out, keeps
    the writes atomic and the WAIT on their connection (a WAIT inside MULTI would not
    wait)."""
    if not acks:
        _stage_and_push(pipe, messages, bodies)  # the caller's pipeline is the MULTI
        return
    pipe.execute_command("MULTI")
    _stage_and_push(pipe, messages, bodies)
    pipe.execute_command("EXEC")
    pipe.execute_command("WAIT", acks, get_settings().replica_ack_timeout_ms)


def _check_acks(replies: list[Any], *, acks: int) -> None:
    """Refuse to acknowledge what fewer than `acks` replicas hold: a failover now
    could lose it. The write stays on the primary; a resend (same turn ids) is safe."""
    if acks and int(replies[-1]) < acks:
        raise ServiceUnavailable(
            f"{replies[-1]} of {acks} Redis replica(s) confirmed the turn in "
            f"{get_settings().replica_ack_timeout_ms} ms; it was not accepted, retry",
            retry_after_s=1,
        )


def _ingest_messages(bodies: list[bytes]) -> list[tuple[str, bytes]]:
    return [
        task_message.task_message(TaskName.INGEST_TURNS, _ingest_kwargs(b), Queue.INGEST)
        for b in bodies
    ]


def _stage_and_push(
    pipe: redis_inbox.AnyPipeline, messages: list[tuple[str, bytes]], bodies: list[bytes]
) -> None:
    """The inbox copies, then the messages, into the caller's MULTI."""
    now = time.time()
    for (task_id, _), body in zip(messages, bodies, strict=True):
        redis_inbox.stage(pipe, task_id, body, now=now)
    # LPUSH m1 m2 leaves m1 at the tail, where BRPOP consumes first: FIFO.
    pipe.lpush(Queue.INGEST.value, *[m for _, m in messages])


def _ingest_kwargs(body: bytes) -> bytes:
    return b'{"payload":' + body + b"}"


def resend_from_inbox(task_id: str, body: bytes, *, broker_url: str) -> None:
    """Re-send a payload the inbox still holds, under its original task id, so the
    worker that persists it clears that same inbox entry."""
    _, message = task_message.task_message(
        TaskName.INGEST_TURNS, _ingest_kwargs(body), Queue.INGEST, task_id=task_id
    )
    task_message.publisher(broker_url).client.lpush(Queue.INGEST.value, message)


def send_consolidate(
    tenant: str,
    turn_ids: list[str],
    *,
    broker_url: str,
    request_id: str | None = None,
    countdown: float | None = None,
) -> None:
    """One consolidate task for these (already persisted) turns, `countdown` seconds
    from now when given."""
    producer_app(broker_url).send_task(
        TaskName.CONSOLIDATE_TURNS,
        kwargs={"tenant": tenant, "turn_ids": turn_ids},
        queue=pipeline_queue(get_settings().pipeline_uses_llm, local=Queue.EMBED),
        # The originating request's id, so the worker's log lines for these turns carry it.
        headers={"request_id": request_id or current_request_id() or ""},
        countdown=countdown,
    )


def send_summarize(
    *,
    tenant: str,
    user_id: str,
    session_id: str,
    turn_ids: list[str],
    broker_url: str | None = None,
) -> None:
    """Ask the workers to fold turns evicted from a session buffer into its summary."""
    url = _url(broker_url)
    kwargs = _summarize_kwargs(tenant, user_id, session_id, turn_ids)
    queue = _summarize_queue()
    if task_message.supports(url):
        task_message.publisher(url).publish_many(
            TaskName.SUMMARIZE_SESSION, [orjson.dumps(kwargs)], queue
        )
        return
    producer_app(url).send_task(TaskName.SUMMARIZE_SESSION, kwargs=kwargs, queue=queue)


async def send_summarize_async(
    client: redis.asyncio.Redis, *, tenant: str, user_id: str, session_id: str, turn_ids: list[str]
) -> None:
    """`send_summarize` on the caller's asyncio client of a Redis broker."""
    kwargs = orjson.dumps(_summarize_kwargs(tenant, user_id, session_id, turn_ids))
    queue = _summarize_queue()
    _, message = task_message.task_message(TaskName.SUMMARIZE_SESSION, kwargs, queue)
    await client.lpush(queue, message)


def _summarize_kwargs(
    tenant: str, user_id: str, session_id: str, turn_ids: list[str]
) -> dict[str, Any]:
    return {"tenant": tenant, "user_id": user_id, "session_id": session_id, "turn_ids": turn_ids}


def _summarize_queue() -> str:
    return pipeline_queue(get_settings().pipeline_uses_llm, local=Queue.INGEST).value


def send_by_name(task_name: str, kwargs: dict[str, Any], *, broker_url: str | None = None) -> None:
    """Any Memwell task by its stable name, to its usual queue (dead-letter replay)."""
    known = {t.value for t in TaskName}
    queue = TASK_QUEUES.get(TaskName(task_name), Queue.INGEST) if task_name in known else None
    producer_app(_url(broker_url)).send_task(
        task_name, kwargs=kwargs, queue=(queue or Queue.INGEST).value
    )


def declare_queues(broker_url: str) -> None:
    """(Re)declare every Memwell queue and its binding on the broker.

    Kombu's Redis transport routes by binding keys kept in Redis itself; a Redis that
    lost its data (no AOF, a wipe) also lost them, and publishes are then silently
    routed nowhere until some process declares the queues again. The sweeper calls
    this before re-dispatching, so it repairs the routing it relies on."""
    with producer_app(broker_url).connection_for_write() as conn:
        channel = conn.default_channel
        for queue in kombu_queues():
            queue.bind(channel).declare()
