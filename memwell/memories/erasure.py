"""Verifiable erasure of one user, and redaction of one memory's history.

`erase_user_rows` deletes everything of a (tenant, user) from every table in one
transaction and leaves a tombstone keyed by a hash of the user id (the id itself is
gone too). Turns still in the broker's queue are reached through the tombstone: the
ingest step drops a turn of an erased user whose event time is not after the
erasure. An advisory lock per (tenant, user) (exclusive here, shared in ingest)
orders erasure against a persist in flight, so no turn slips in between.

The Redis side (session buffers and running summaries) is erased by the caller in
the same unit of work, before the commit: if Redis fails, the rows stay and a retry
erases both.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import redis
import redis.asyncio
from sqlalchemy import bindparam, case, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session

from memwell.buffer.session_buffer import user_key_pattern
from memwell.db.models import ChatSession, DeadLetter, Memory, MemoryEvent, Turn, UserErasure

REDACTED: Final = "[redacted]"
_SCAN_BATCH: Final = 500


# A dead letter holds a task's kwargs: an ingest payload's turns, or ids. Any object
# anywhere in it with this user's id marks the letter as the user's.
def _mentions_user(user_id: str) -> Any:
    return text(
        "jsonb_path_exists(dead_letters.payload, '$.** ? (@.user_id == $u)', :vars)"
    ).bindparams(bindparam("vars", value={"u": user_id}, type_=JSONB))


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


def user_hash(tenant: str, user_id: str) -> str:
    """The tombstone's key: the erased id must not survive its own erasure."""
    raw = f"{tenant}\x1f{user_id}".encode("utf-8", errors="surrogatepass")
    return hashlib.sha256(raw).hexdigest()


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
    by_hash = {user_hash(tenant, u): u for u in set(user_ids)}
    if not by_hash:
        return {}
    rows = session.execute(
        select(UserErasure.user_hash, UserErasure.erased_at).where(
            UserErasure.tenant == tenant, UserErasure.user_hash.in_(by_hash)
        )
    ).all()
    return {by_hash[h]: at for h, at in rows}


def _count(session: Session, stmt: Any) -> int:
    return len(session.execute(stmt).all())


def erase_user_rows(
    session: Session, *, tenant: str, user_id: str
) -> tuple[datetime, dict[str, int]]:
    """Delete the user's rows in every table and record the tombstone, in the caller's
    transaction. Returns the erasure time and the rows deleted per table."""
    lock_users(session, tenant, [user_id], shared=False)
    digest = user_hash(tenant, user_id)
    erased_at: datetime = session.execute(select(func.clock_timestamp())).scalar_one()
    counts = {
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
    }
    stmt = insert(UserErasure).values(
        tenant=tenant, user_hash=digest, erased_at=erased_at, receipt={"counts": counts}
    )
    session.execute(
        stmt.on_conflict_do_update(
            index_elements=["tenant", "user_hash"],
            set_={"erased_at": stmt.excluded.erased_at, "receipt": stmt.excluded.receipt},
        )
    )
    return erased_at, counts


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


def erase_user(
    session: Session, client: redis.Redis, *, tenant: str, user_id: str
) -> ErasureReceipt:
    """Erase one user from Postgres and Redis (sync: CLI, workers). Caller commits."""
    erased_at, counts = erase_user_rows(session, tenant=tenant, user_id=user_id)
    counts["redis_keys"] = erase_user_keys(client, tenant=tenant, user_id=user_id)
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
) -> ErasureReceipt:
    """Erase one user from Postgres and Redis (the API); commits."""
    async with sessions(info={"tenant": tenant}) as session, session.begin():
        erased_at, counts = await session.run_sync(
            lambda sync: erase_user_rows(sync, tenant=tenant, user_id=user_id)
        )
        counts["redis_keys"] = await erase_user_keys_async(client, tenant=tenant, user_id=user_id)
    return ErasureReceipt(tenant=tenant, user_id=user_id, erased_at=erased_at, counts=counts)
