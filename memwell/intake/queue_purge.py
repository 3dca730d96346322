"""Erasure's reach into the broker: the user's turns taken out of queued ingest tasks.

An ingest message waiting in the `ingest` list carries its turns' content. Erasure
scans that list (one pass, in pages; a backlog of n messages costs n reads) and, for
each message that holds the user's turns, atomically swaps it for the same message
without them, or removes it when nothing else is left. The swap happens only if
the message is still queued: one a worker took meanwhile is past reach here, and
the ingest step's tombstone check drops its turns instead (as it does for a message
a worker holds unacknowledged). Only ingest messages carry content; the other
queues carry ids.

Messages are Celery's protocol v2 on Kombu's Redis transport: a JSON envelope whose
base64 body is `[args, kwargs, embed]`, the payload being `kwargs["payload"]`.
"""

from __future__ import annotations

import base64
from typing import Any, Final

import orjson
import redis

from memwell.core.queues import Queue
from memwell.intake.redis_inbox import without_user

_PAGE: Final = 1000

# Swap one queued message for another (or drop it, given an empty one), only if it is
# still queued. The new one goes to the consuming end: it was already waiting.
_SWAP = """
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then return 0 end
if ARGV[2] ~= '' then redis.call('RPUSH', KEYS[1], ARGV[2]) end
return 1
"""


def _rewritten(raw: bytes, *, tenant: str, user_id: str) -> bytes | None:
    """The message without the user's turns ("" to drop it), or None to leave it."""
    try:
        envelope = orjson.loads(raw)
        args, kwargs, embed = orjson.loads(base64.b64decode(envelope["body"]))
        payload = kwargs["payload"]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    rest = without_user(payload, tenant=tenant, user_id=user_id)
    if rest is payload:
        return None
    if rest is None:
        return b""
    body = orjson.dumps([args, {**kwargs, "payload": rest}, embed])
    return orjson.dumps({**envelope, "body": base64.b64encode(body).decode()})


def purge_user(client: redis.Redis, *, tenant: str, user_id: str) -> int:
    """Take the user's turns out of every queued ingest message; returns messages
    changed or removed."""
    found: list[tuple[bytes, bytes]] = []
    start = 0
    while True:
        page: list[Any] = client.lrange(Queue.INGEST.value, start, start + _PAGE - 1)
        for raw in page:
            replacement = _rewritten(raw, tenant=tenant, user_id=user_id)
            if replacement is not None:
                found.append((raw, replacement))
        if len(page) < _PAGE:
            break
        start += _PAGE
    return sum(int(client.eval(_SWAP, 1, Queue.INGEST.value, old, new)) for old, new in found)
