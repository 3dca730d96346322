"""One memory by id: read it, tombstone it, read its history.

Every query names the tenant, so an id guessed across tenants is simply not found.
Delete is a tombstone (`deleted_at`) plus a 'delete' event; the prune job hard-deletes
after a grace period, and the history outlives the row.
"""

from __future__ import annotations

import uuid

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from memwell.core.errors import NotFound
from memwell.db.models import Memory, MemoryEvent
from memwell.memories.erasure import REDACTED, redact_memory_history
from memwell.memories.record import HistoryEvent, MemoryRecord


async def _load(session: AsyncSession, tenant: str, memory_id: uuid.UUID) -> Memory:
    memory = await session.scalar(
        select(Memory).where(Memory.tenant == tenant, Memory.id == memory_id)
    )
    if memory is None:
        raise NotFound(f"memory {memory_id} not found")
    return memory


async def get_memory(session: AsyncSession, *, tenant: str, memory_id: uuid.UUID) -> MemoryRecord:
    """The memory, including a tombstoned or superseded one (say so in its fields)."""
    return MemoryRecord.of(await _load(session, tenant, memory_id))


async def delete_memory(
    session: AsyncSession,
    *,
    tenant: str,
    memory_id: uuid.UUID,
    user_id: str | None = None,
    reason: str | None = None,
) -> MemoryRecord:
    """Tombstone the memory, remove its text (from the row and from its history, whose
    events stay with their content redacted) and log a 'delete' event. Deleting twice
    is a no-op.

    With `user_id` (a caller acting for one user, such as an agent), the memory must be
    that user's and still live, or it is not found."""
    memory = await _load(session, tenant, memory_id)
    if user_id is not None and (memory.user_id != user_id or memory.deleted_at is not None):
        raise NotFound(f"memory {memory_id} not found for user {user_id!r}")
    if memory.deleted_at is None:
        await session.execute(
            update(Memory)
            .where(Memory.tenant == tenant, Memory.id == memory_id, Memory.deleted_at.is_(None))
            .values(deleted_at=func.now(), updated_at=func.now(), content=REDACTED, embedding=None)
        )
        await session.execute(
            insert(MemoryEvent).values(
                tenant=tenant, user_id=memory.user_id, memory_id=memory_id, event="delete",
                old_content=None, new_content=None,
                source_turn_ids=list(memory.source_turn_ids), reason=reason or "api delete",
            )
        )  # fmt: skip
        await session.run_sync(
            lambda s: redact_memory_history(s, tenant=tenant, memory_id=memory_id)
        )
        await session.refresh(memory)
    return MemoryRecord.of(memory)


async def memory_history(
    session: AsyncSession, *, tenant: str, memory_id: uuid.UUID
) -> list[HistoryEvent]:
    """Every event of the memory, oldest first; NotFound when it has none at all."""
    rows = (
        await session.scalars(
            select(MemoryEvent)
            .where(MemoryEvent.tenant == tenant, MemoryEvent.memory_id == memory_id)
            .order_by(MemoryEvent.id)
        )
    ).all()
    if not rows:
        await _load(session, tenant, memory_id)  # raises NotFound for an unknown id
    return [HistoryEvent.of(e) for e in rows]
