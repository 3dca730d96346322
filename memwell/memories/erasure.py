"""Verifiable erasure of one user, and redaction of one memory's history.

`erase_user_rows` deletes everything of a (tenant, user) from every table in one
transaction and leaves a tombstone keyed by an HMAC of the user id (the id itself is
gone too; memwell/memories/tombstones.py). An advisory lock per (tenant, user)
(exclusive here, shared in ingest) orders erasure against a persist in flight, so no
turn slips in between.

Before that transaction touches a row, the user's leftovers outside the tenant's
reach are removed on the connecting role's own connection: the per-user ANN indexes
(their names and predicates carry the user id; DROP INDEX CONCURRENTLY must run
outside any transaction that locks `memories`) and dead letters that name the user
but carry no tenant (a poison payload without one). If the transaction then fails,
a retry finds those already gone.

The Redis side is erased by the caller in the same unit of work, before the commit:
session buffers and running summaries, the user's turns in the enqueue inbox, and
the user's turns in queued ingest messages (memwell/intake/queue_purge.py); those turns
are recorded as dropped first (memwell/intake/dropped_turns.py), so their status says
so. A message a worker has already taken is dropped by the ingest step's tombstone
check: it skips a turn of an erased user whose event time is not after the erasure. If Redis fails,
the rows stay and a retry erases both.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import redis
import redis.asyncio
from sqlalchemy import (
    Connection,
    and_,
    bindparam,
    case,
    delete,
    func,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session

from memwell.buffer.session_buffer import user_key_pattern
from memwell.core import stack
from memwell.core.settings import get_settings
from memwell.db.models import (
    ChatSession,
    DeadLetter,
    EmbeddingMigration,
    Entity,
    EntityAlias,
    EntityRelation,
    Memory,
    MemoryEntity,
    MemoryEvent,
    Turn,
    UserErasure,
)
from memwell.intake import queue_purge, redis_inbox, task_message
from memwell.intake.dropped_turns import USER_ERASED, record_dropped
from memwell.memories.tombstones import legacy_user_hash, user_hash
from memwell.retrieval.ann import drop_user_indexes

REDACTED: Final = "[redacted]"
_SCAN_BATCH: Final = 500


# A dead letter holds a task's kwargs: an ingest payload's turns, or ids, or a poison
# payload of any shape (a misspelt field, a field in the wrong place). The user's id as
# any string value, under any key, marks the letter as the user's: erasure errs
# towards deleting, since it cannot know what a payload it could not parse meant.
def _mentions_user(user_id: str) -> Any:
    return text("jsonb_path_exists(dead_letters.payload, '$.** ? (@ == $u)', :vars)").bindparams(
        bindparam("vars", value={"u": user_id}, type_=JSONB)
    )


# A message no worker could read (memwell/../worker/undecodable.py) is kept as its raw
# bytes: it is the user's when those bytes hold both the tenant and the user id.
def _raw_bytes_mention(tenant: str, user_id: str) -> Any:
    return text(
        "dead_letters.payload ? 'unreadable_body_b64' AND "
        "position(convert_to(:raw_user, 'UTF8') in "
        "decode(dead_letters.payload->>'unreadable_body_b64', 'base64')) > 0 AND "
        "position(convert_to(:raw_tenant, 'UTF8') in "
        "decode(dead_letters.payload->>'unreadable_body_b64', 'base64')) > 0"
    ).bindparams(raw_user=user_id, raw_tenant=tenant)


@dataclass(frozen=True)
class ErasureReceipt:
    """What was erased, per store, and when."""

    tenant: str
    user_id: str
    erased_at: datetime
    counts: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "user_id": self.user_id,
            "erased_at": self.erased_at.isoformat(),
            "counts": dict(self.counts),
        }


# A dead letter without a tenant (a poison payload that lacked one) is the user's when it
# names the user and no other tenant: erasure errs towards deleting.
def _orphan_of(tenant: str) -> Any:
    return text(
        "NOT jsonb_path_exists(dead_letters.payload, "
        "'$.** ? (@.tenant.type() == \"string\" && @.tenant != $t)', :tvars)"
    ).bindparams(bindparam("tvars", value={"t": tenant}, type_=JSONB))


def lock_users(session: Session, tenant: str, user_ids: Iterable[str], *, shared: bool) -> None:
    """Transaction-scoped advisory locks per (tenant, user), held until commit."""
    # One round trip for the whole batch. Order does not matter for deadlocks: shared
    # locks never wait on each other, and an erasure takes exactly one exclusive lock.
    fn = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    keys = sorted({user_hash(tenant, u) for u in user_ids})
    session.execute(
        text(f"SELECT {fn}(hashtextextended(k, 0)) FROM unnest(CAST(:keys AS text[])) AS k"),
        {"keys": keys},
    ).all()


def erasures_of(session: Session, tenant: str, user_ids: Iterable[str]) -> dict[str, datetime]:
    """user id -> when it was erased, for those of `user_ids` that were."""
    by_hash: dict[str, str] = {}
    for user in set(user_ids):
        by_hash[user_hash(tenant, user)] = user
        by_hash[legacy_user_hash(tenant, user)] = user
    if not by_hash:
        return {}
    rows = session.execute(
        select(UserErasure.user_hash, UserErasure.erased_at).where(
            UserErasure.tenant == tenant, UserErasure.user_hash.in_(by_hash)
        )
    ).all()
    found: dict[str, datetime] = {}
    for digest, at in rows:
        user = by_hash[digest]
        found[user] = max(at, found.get(user, at))
    return found


def erase_outside_tenant(conn: Connection, *, tenant: str, user_id: str) -> dict[str, int]:
    """The user's per-user indexes and tenantless dead letters, on an autocommit
    connection of the connecting role (row-level security hides both from a tenant),
    before the erasure's own transaction locks `memories`."""
    return {
        "ann_indexes": drop_user_indexes(conn, tenant=tenant, user_id=user_id),
        "dead_letters_without_tenant": _count(
            conn,
            delete(DeadLetter)
            .where(
                DeadLetter.tenant.is_(None),
                or_(
                    and_(_mentions_user(user_id), _orphan_of(tenant)),
                    _raw_bytes_mention(tenant, user_id),
                ),
            )
            .returning(DeadLetter.id),
        ),
    }


def _erase_outside_tenant(session: Session, *, tenant: str, user_id: str) -> dict[str, int]:
    bind = session.get_bind()
    engine = bind.engine if isinstance(bind, Connection) else bind
    with engine.connect() as conn:
        return erase_outside_tenant(
            conn.execution_options(isolation_level="AUTOCOMMIT"), tenant=tenant, user_id=user_id
        )


def _count(session: Session | Connection, stmt: Any) -> int:
    return len(session.execute(stmt).all())


# What refers to an entity goes before the entities themselves.
_ENTITY_TABLES = (EntityRelation, MemoryEntity, EntityAlias, Entity)


def _erase_entities(session: Session, *, tenant: str, user_id: str) -> dict[str, int]:
    """The user's entity memory: relations, memory links, aliases, then the entities."""
    return {
        table.__tablename__: _count(
            session,
            delete(table)
            .where(table.tenant == tenant, table.user_id == user_id)
            .returning(table.tenant),
        )
        for table in _ENTITY_TABLES
    }


def erase_user_rows(
    session: Session, *, tenant: str, user_id: str
) -> tuple[datetime, dict[str, int]]:
    """Delete the user's rows in every table and record the tombstone, in the caller's
    transaction, which must not have touched `memories` yet (the user's indexes are
    dropped first, concurrently). Returns the erasure time and the rows deleted per
    table."""
    outside = _erase_outside_tenant(session, tenant=tenant, user_id=user_id)
    lock_users(session, tenant, [user_id], shared=False)
    digest = user_hash(tenant, user_id)
    erased_at: datetime = session.execute(select(func.clock_timestamp())).scalar_one()
    counts = {
        **outside,
        "turns": _count(
            session,
            delete(Turn).where(Turn.tenant == tenant, Turn.user_id == user_id).returning(Turn.id),
        ),
        "memory_events": _count(
            session,
            delete(MemoryEvent)
            .where(MemoryEvent.tenant == tenant, MemoryEvent.user_id == user_id)
            .returning(MemoryEvent.id),
        ),
        # Entity rows before the memories: their links would go with the memories by
        # cascade, uncounted, and the receipt must say what the user's entity memory held.
        **_erase_entities(session, tenant=tenant, user_id=user_id),
        "memories": _count(
            session,
            delete(Memory)
            .where(Memory.tenant == tenant, Memory.user_id == user_id)
            .returning(Memory.id),
        ),
        "sessions": _count(
            session,
            delete(ChatSession)
            .where(ChatSession.tenant == tenant, ChatSession.user_id == user_id)
            .returning(ChatSession.id),
        ),
        "dead_letters": _count(
            session,
            delete(DeadLetter)
            .where(DeadLetter.tenant == tenant, _mentions_user(user_id))
            .returning(DeadLetter.id),
        ),
        # A re-embed scoped to this one user names them; its vectors went with the
        # memories (cascade), and a step still in flight finds no row and stops.
        "reembed_runs": _count(
            session,
            delete(EmbeddingMigration)
            .where(EmbeddingMigration.tenant == tenant, EmbeddingMigration.user_id == user_id)
            .returning(EmbeddingMigration.id),
        ),
    }
    # An unkeyed tombstone of an earlier erasure would keep the id confirmable.
    session.execute(
        delete(UserErasure).where(
            UserErasure.tenant == tenant,
            UserErasure.user_hash == legacy_user_hash(tenant, user_id),
        )
    )
    receipt = {"erased_at": erased_at.isoformat(), "counts": counts}
    stmt = insert(UserErasure).values(
        tenant=tenant, user_hash=digest, erased_at=erased_at, receipt={"receipts": [receipt]}
    )
    session.execute(
        stmt.on_conflict_do_update(
            index_elements=["tenant", "user_hash"],
            set_={"erased_at": stmt.excluded.erased_at, "receipt": _RECEIPTS_APPENDED},
        )
    )
    return erased_at, counts


# A repeat erasure adds its receipt to the earlier ones, which stay the proof of what
# each erased. A tombstone from before receipts were kept as a list held one receipt
# under "counts": it becomes the list's first entry.
_RECEIPTS_APPENDED: Final = text(
    "jsonb_build_object('receipts', COALESCE(user_erasures.receipt->'receipts', "
    "CASE WHEN user_erasures.receipt ? 'counts' THEN jsonb_build_array(jsonb_build_object("
    "'erased_at', to_jsonb(user_erasures.erased_at), 'counts', user_erasures.receipt->'counts'))"
    " ELSE '[]'::jsonb END) || (excluded.receipt->'receipts'))"
)


def erasure_receipts(session: Session, *, tenant: str, user_id: str) -> list[ErasureReceipt]:
    """Every erasure of the user, oldest first, with what each removed."""
    digests = [user_hash(tenant, user_id), legacy_user_hash(tenant, user_id)]
    stored = session.scalars(
        select(UserErasure.receipt).where(
            UserErasure.tenant == tenant, UserErasure.user_hash.in_(digests)
        )
    ).all()
    return [
        ErasureReceipt(
            tenant=tenant,
            user_id=user_id,
            counts=dict(entry["counts"]),
            erased_at=datetime.fromisoformat(entry["erased_at"]),
        )  # fmt: skip
        for receipt in stored
        for entry in receipt.get("receipts", [])
    ]


def erase_user_keys(client: redis.Redis, *, tenant: str, user_id: str) -> int:
    """Unlink every Redis key of the user (buffers, totals, summaries); SCAN, not KEYS."""
    deleted = 0
    batch: list[Any] = []
    for key in client.scan_iter(match=user_key_pattern(tenant, user_id), count=1000):
        batch.append(key)
        if len(batch) >= _SCAN_BATCH:
            deleted += int(client.unlink(*batch))
            batch = []
    if batch:
        deleted += int(client.unlink(*batch))
    return deleted


async def erase_user_keys_async(client: redis.asyncio.Redis, *, tenant: str, user_id: str) -> int:
    """`erase_user_keys` for the API's async client."""
    deleted = 0
    batch: list[Any] = []
    async for key in client.scan_iter(match=user_key_pattern(tenant, user_id), count=1000):
        batch.append(key)
        if len(batch) >= _SCAN_BATCH:
            deleted += int(await client.unlink(*batch))
            batch = []
    if batch:
        deleted += int(await client.unlink(*batch))
    return deleted


def erase_queued(client: redis.Redis, *, tenant: str, user_id: str) -> dict[str, int]:
    """The user's turns out of the enqueue inbox and the queued ingest messages."""
    return {
        "inbox_entries": redis_inbox.purge_user(client, tenant=tenant, user_id=user_id),
        "queued_messages": queue_purge.purge_user(client, tenant=tenant, user_id=user_id),
    }


def erase_user(
    session: Session, client: redis.Redis, *, tenant: str, user_id: str
) -> ErasureReceipt:
    """Erase one user from Postgres and Redis (sync: CLI, workers). Caller commits."""
    erased_at, counts = erase_user_rows(session, tenant=tenant, user_id=user_id)
    counts["redis_keys"] = erase_user_keys(client, tenant=tenant, user_id=user_id)
    in_flight = redis_inbox.in_flight_turn_ids(client, tenant=tenant, user_id=user_id)
    record_dropped(session, tenant=tenant, turn_ids=in_flight, reason=USER_ERASED)
    counts.update(erase_queued(client, tenant=tenant, user_id=user_id))
    return ErasureReceipt(tenant=tenant, user_id=user_id, erased_at=erased_at, counts=counts)


def redact_memory_history(session: Session, *, tenant: str, memory_id: uuid.UUID) -> int:
    """Blank the text of every history event of a deleted memory (and of events of
    other memories that name it as related, which may quote it); the events stay,
    so the audit trail keeps its shape. Records a `redact` event. Returns events
    redacted. Call it in the same transaction that deletes the memory."""
    touched = session.execute(
        update(MemoryEvent)
        .where(
            MemoryEvent.tenant == tenant,
            (MemoryEvent.memory_id == memory_id) | (MemoryEvent.related_memory_id == memory_id),
            MemoryEvent.event != "redact",
        )
        .values(
            old_content=case((MemoryEvent.old_content.is_(None), None), else_=REDACTED),
            new_content=case((MemoryEvent.new_content.is_(None), None), else_=REDACTED),
        )
        .returning(MemoryEvent.memory_id, MemoryEvent.user_id)
    ).all()
    owner = session.scalar(
        select(Memory.user_id).where(Memory.tenant == tenant, Memory.id == memory_id)
    ) or next((user for mid, user in touched if mid == memory_id), None)
    if owner is not None:
        session.add(
            MemoryEvent(
                tenant=tenant,
                user_id=owner,
                memory_id=memory_id,
                event="redact",
                reason=f"content of {len(touched)} history events redacted",
            )
        )
        session.flush()
    return len(touched)


async def erase_user_async(
    sessions: async_sessionmaker[AsyncSession],
    client: redis.asyncio.Redis,
    *,
    tenant: str,
    user_id: str,
    broker_url: str | None = None,
) -> ErasureReceipt:
    """Erase one user from Postgres and Redis (the API); commits. The queue and inbox
    purge runs on the broker's sync client (default: the stack's Redis), in a thread."""
    broker = task_message.publisher(broker_url or stack.redis_url(get_settings())).client
    async with sessions(info={"tenant": tenant}) as session, session.begin():
        erased_at, counts = await session.run_sync(
            lambda sync: erase_user_rows(sync, tenant=tenant, user_id=user_id)
        )
        counts["redis_keys"] = await erase_user_keys_async(client, tenant=tenant, user_id=user_id)
        in_flight = await asyncio.to_thread(
            redis_inbox.in_flight_turn_ids, broker, tenant=tenant, user_id=user_id
        )
        await session.run_sync(
            lambda sync: record_dropped(sync, tenant=tenant, turn_ids=in_flight, reason=USER_ERASED)
        )
        counts.update(await asyncio.to_thread(erase_queued, broker, tenant=tenant, user_id=user_id))
    return ErasureReceipt(tenant=tenant, user_id=user_id, erased_at=erased_at, counts=counts)
