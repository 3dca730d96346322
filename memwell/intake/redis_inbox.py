"""A Redis-side outbox for `enqueue_turn` payloads, closing the broker's own gap.

Kombu's Redis transport takes a message off its list (BRPOP) and only then records it
as unacknowledged, in a second round trip: a worker whose main process is SIGKILLed
between the two loses the message for good. The chaos bench caught it (one 50-turn
payload in 5,000 turns, with 13 kills). So the producer first stores the payload
here, in Redis (AOF) under its request id, then sends the task; the ingest task
removes the entry once the turns are committed to Postgres; and the sweeper re-sends
entries older than MEMWELL_SWEEP_AFTER_S. Persisting is idempotent on turn ids, so a
re-send of a payload that was merely slow costs a no-op.

Erasure of a user purges the user's turns from the entries (`purge_user`), so
neither the inbox nor a re-send outlives the erasure. A session clear reads the
session's turns here (`in_flight_turn_ids`): they are the ones acknowledged before it
and not yet stored, which it records as dropped (memwell/sessions/fence.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import orjson
import redis
from redis.asyncio.client import Pipeline as AsyncPipeline
from redis.client import Pipeline

from memwell.buffer.session_buffer import KEY_PREFIX

#: a MULTI being built, by a sync or an asyncio client (queuing a command is sync in both)
AnyPipeline = Pipeline | AsyncPipeline

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


def stage(pipe: AnyPipeline, task_id: str, payload_json: bytes, *, now: float) -> None:
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


def without_user(payload: Any, *, tenant: str, user_id: str) -> Any:
    """An ingest payload minus the turns of (tenant, user_id): the payload itself when
    it holds none of them, None when it holds nothing else. Shapes it does not know
    come back unchanged (a worker dead-letters them; erasure reaches dead letters)."""
    if not isinstance(payload, dict) or payload.get("tenant") != tenant:
        return payload
    turns = payload.get("turns")
    if not isinstance(turns, list):
        return payload
    kept = [t for t in turns if not (isinstance(t, dict) and t.get("user_id") == user_id)]
    if len(kept) == len(turns):
        return payload
    return {**payload, "turns": kept} if kept else None


def _entries(client: redis.Redis) -> Iterator[tuple[Any, bytes, Any]]:
    """(task id, raw JSON, parsed payload) of every inbox entry that parses."""
    for task_id, raw in client.hscan_iter(INBOX_KEY, count=500):
        try:
            yield task_id, raw, orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue


def purge_user(client: redis.Redis, *, tenant: str, user_id: str) -> int:
    """Remove the user's turns from every inbox entry (the whole entry when nothing
    else is left), so the sweeper never re-sends them. Returns entries changed."""
    changed = 0
    for task_id, raw, payload in _entries(client):
        rest = without_user(payload, tenant=tenant, user_id=user_id)
        if rest is payload:
            continue
        # Only if the entry is still there and unchanged: a worker may have finished it.
        if client.eval(_REPLACE, 2, INBOX_KEY, INDEX_KEY, task_id, raw,
                       b"" if rest is None else orjson.dumps(rest)):  # fmt: skip
            changed += 1
    return changed


def in_flight_turn_ids(
    client: redis.Redis, *, tenant: str, user_id: str, session_id: str | None = None
) -> set[str]:
    """Ids of the user's turns (of one session, if given) in the inbox: acknowledged and
    not yet stored (still queued, or taken by a worker that has not committed them).
    One pass, like `purge_user`."""
    found: set[str] = set()
    for _, _, payload in _entries(client):
        if not isinstance(payload, dict) or payload.get("tenant") != tenant:
            continue
        turns = payload.get("turns")
        for t in turns if isinstance(turns, list) else ():
            if (
                isinstance(t, dict)
                and t.get("user_id") == user_id
                and session_id in (None, t.get("session_id"))
                and isinstance(t.get("id"), str)
            ):
                found.add(t["id"])
    return found


# Replace (or, given an empty value, delete) one inbox entry if it still holds ARGV[2].
_REPLACE = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
return 1
"""
