"""Access tracking off the request path: record in Redis, flush to Postgres in batches.

A search must not write to Postgres (an UPDATE per hit would cost more than the query
and contend on hot rows). Instead the request fires one RPUSH of its hit ids without
awaiting it, once its reply is sent (`after_reply`), and a beat task drains the list
in bounded batches with one aggregated UPDATE per batch: access_count += hits,
last_accessed_at = latest hit.

Losing a batch (a worker killed between pop and commit) loses access statistics,
never memories; that trade keeps the queue a plain list.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import redis
import redis.asyncio as aioredis
from sqlalchemy import text
from sqlalchemy.orm import Session

from memwell.core.background import after_reply

log = logging.getLogger(__name__)

ACCESS_KEY = "memwell:accessed"


def _entries(tenant: str, ids: Iterable[uuid.UUID], at: datetime) -> list[str]:
    stamp = at.isoformat()
    return [json.dumps([tenant, str(i), stamp]) for i in ids]


async def record_access(
    client: aioredis.Redis, *, tenant: str, ids: list[uuid.UUID], at: datetime | None = None
) -> None:
    """Append the hits to the access list (one round trip)."""
    if ids:
        await client.rpush(ACCESS_KEY, *_entries(tenant, ids, at or datetime.now(UTC)))


def record_access_in_background(
    client: aioredis.Redis, *, tenant: str, ids: list[uuid.UUID]
) -> None:
    """Schedule `record_access` without awaiting it: the response does not wait."""
    if not ids:
        return
    after_reply(
        record_access(client, tenant=tenant, ids=ids, at=datetime.now(UTC)),
        what=f"access tracking of {len(ids)} hits",
    )


_FLUSH = text(
    """
    UPDATE memories m
    SET access_count = m.access_count + a.n,
        last_accessed_at = greatest(m.last_accessed_at, a.at)
    FROM (
        SELECT tenant, CAST(id AS uuid) AS id, count(*) AS n, max(CAST(at AS timestamptz)) AS at
        FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS x(tenant text, id text, at text)
        GROUP BY tenant, id
    ) a
    WHERE m.tenant = a.tenant AND m.id = a.id
    """
)


def flush_access(session: Session, client: redis.Redis, *, batch: int) -> int:
    """Move up to `batch` recorded hits into Postgres; returns how many were consumed."""
    raw: Any = client.lpop(ACCESS_KEY, batch)
    if not raw:
        return 0
    rows = []
    for item in raw:
        try:
            tenant, memory_id, at = json.loads(item)
            rows.append({"tenant": tenant, "id": str(uuid.UUID(memory_id)), "at": at})
        except (ValueError, TypeError):
            log.warning("skipping malformed access entry %r", item)
    if rows:
        session.execute(_FLUSH, {"rows": json.dumps(rows)})
    return len(raw)
