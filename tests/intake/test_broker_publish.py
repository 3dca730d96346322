"""The direct Redis publisher writes messages Celery's own consumer decodes, in order."""

from __future__ import annotations

import uuid

import redis
from kombu import Connection

from memwell.intake.task_message import publisher


def test_messages_decode_as_celery_tasks_in_fifo_order(redis_url: str) -> None:
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    ids = publisher(redis_url).publish_many(
        "memwell.ingest_turns", [b'{"payload":{"n":%d}}' % n for n in range(3)], queue
    )
    received = []
    with Connection(redis_url) as conn, conn.SimpleQueue(queue) as simple:
        for _ in range(3):
            message = simple.get(timeout=5)
            received.append((message.headers["id"], message.headers["task"], message.decode()))
            message.ack()
    assert [r[0] for r in received] == ids
    assert {r[1] for r in received} == {"memwell.ingest_turns"}
    assert [r[2][1]["payload"]["n"] for r in received] == [0, 1, 2]
    assert redis.Redis.from_url(redis_url).llen(queue) == 0
