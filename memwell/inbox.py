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

import json
from typing import Any, Final

import redis

from memwell.buffer import KEY_PREFIX

INBOX_KEY: Final = f"{KEY_PREFIX}inbox"
INDEX_KEY: Final = f"{KEY_PREFIX}inbox:index"

# Claim the stale entries atomically (re-stamp their score), so two sweepers never
# re-send the same payload.
_CLAIM = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], ARGV[2], id) end
if #ids == 0 then return {} end
return redis.call('HMGET', KEYS[2], unpack(ids))
"""


def put(client: redis.Redis, request_id: str, payload: dict[str, Any], *, now: float) -> None:
    """Keep the payload until its turns are persisted."""
    with client.pipeline(transaction=True) as pipe:
        pipe.hset(INBOX_KEY, request_id, json.dumps(payload))
        pipe.zadd(INDEX_KEY, {request_id: now})
        pipe.execute()


def done(client: redis.Redis, request_id: str) -> None:
    """The payload's turns are in Postgres: forget it."""
    with client.pipeline(transaction=True) as pipe:
        pipe.hdel(INBOX_KEY, request_id)
        pipe.zrem(INDEX_KEY, request_id)
        pipe.execute()


def claim_stale(
    client: redis.Redis, *, older_than_s: float, now: float, limit: int
) -> list[dict[str, Any]]:
    """Payloads stored before `now - older_than_s` and not done, claimed for a re-send."""
    raw = client.eval(_CLAIM, 2, INDEX_KEY, INBOX_KEY, now - older_than_s, now, limit)
    return [json.loads(item) for item in raw or [] if item is not None]
