"""A Redis-side outbox for `enqueue_turn` payloads, closing the broker's own gap.

Kombu's Redis transport takes a message off its list (BRPOP) and only then records it
as unacknowledged, in a second round trip: a worker whose main process is SIGKILLed
between the two loses the message for good. The chaos bench caught it (one 50-turn
payload in 5,000 turns, with 13 kills). So the producer first stores the payload
here, in Redis (AOF) under its request id, then sends the task; the ingest task
removes the entry once the turns are committed to Postgres; and the sweeper re-sends
entries older than MEMWELL_SWEEP_AFTER_S. Persisting is idempotent on turn ids, so a
re-send of a payload that was merely slow costs a no-op.
"""

from __future__ import annotations

from typing import Final

import redis
from redis.client import Pipeline

from memwell.buffer.session_buffer import KEY_PREFIX

INBOX_KEY: Final = f"{KEY_PREFIX}inbox"
INDEX_KEY: Final = f"{KEY_PREFIX}inbox:index"

# Claim the stale entries atomically (re-stamp their score), so two sweepers never
# re-send the same payload.
_CLAIM = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], ARGV[2], id) end
if #ids == 0 then return {} end
return {ids, redis.call('HMGET', KEYS[2], unpack(ids))}
"""


def stage(pipe: Pipeline, task_id: str, payload_json: bytes, *, now: float) -> None:
    """Add "keep this payload until its turns are persisted" to the caller's MULTI,
    keyed by the id of the task that carries it."""
    pipe.hset(INBOX_KEY, task_id, payload_json)
    pipe.zadd(INDEX_KEY, {task_id: now})


def done(client: redis.Redis, task_id: str) -> None:
    """The payload's turns are in Postgres: forget it."""
    with client.pipeline(transaction=True) as pipe:
        pipe.hdel(INBOX_KEY, task_id)
        pipe.zrem(INDEX_KEY, task_id)
        pipe.execute()


def claim_stale(
    client: redis.Redis, *, older_than_s: float, now: float, limit: int
) -> list[tuple[str, bytes]]:
    """(task id, payload JSON) stored before `now - older_than_s` and not done,
    claimed for a re-send."""
    raw = client.eval(_CLAIM, 2, INDEX_KEY, INBOX_KEY, now - older_than_s, now, limit)
    if not raw:
        return []
    ids, bodies = raw
    return [
        (i.decode() if isinstance(i, bytes) else str(i), b)
        for i, b in zip(ids, bodies, strict=True)
        if b is not None
    ]
