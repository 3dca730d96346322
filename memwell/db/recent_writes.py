"""Who wrote memories a moment ago: their reads go to the primary, not a replica.

A replica replays the primary's WAL a little behind it (milliseconds when idle, more
under load). A user who adds a memory and searches at once expects to find it (POST
/v1/memories says "searchable at once"), so a write leaves a mark in Redis for
MEMWELL_READ_YOUR_WRITES_S, and retrieval reads that user's memories on the primary
while the mark lives. In Redis, not in the process: the search may reach another API
process than the write did.

Only with replicas configured: without them every read is on the primary anyway, and
neither the mark nor its check costs a round trip.
"""

from __future__ import annotations

import logging

import redis
import redis.asyncio as aioredis

from memwell.core.redaction import describe
from memwell.core.settings import Settings

log = logging.getLogger(__name__)

KEY_PREFIX = "memwell:wrote:"


def _key(tenant: str, user_id: str) -> str:
    return f"{KEY_PREFIX}{len(tenant)}:{tenant}:{user_id}"


async def note_write(
    client: aioredis.Redis | None, settings: Settings, *, tenant: str, user_id: str
) -> None:
    """Mark the user as a recent writer. Never fails the write it follows: the write
    is committed, and a missing mark only risks a stale read for a few seconds."""
    if client is None or not settings.database_read_urls or settings.read_your_writes_s <= 0:
        return
    try:
        await client.set(_key(tenant, user_id), b"1", px=int(settings.read_your_writes_s * 1000))
    except redis.RedisError as exc:
        log.warning("could not mark a recent write (reads may lag briefly): %s", describe(exc))


async def wrote_recently(client: aioredis.Redis | None, *, tenant: str, user_id: str) -> bool:
    """Whether the user wrote within the window; True when Redis cannot tell (the
    primary is always right)."""
    if client is None:
        return False
    try:
        return bool(await client.exists(_key(tenant, user_id)))
    except redis.RedisError:
        return True
