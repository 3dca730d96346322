"""What a client sets to steer retention: `pinned` (never pruned) and `expires_at`
(pruned once it passes, unless pinned or important). Each change is recorded in the
memory's history."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from memwell.core.errors import InvalidInput, NotFound
from memwell.db.models import Memory, MemoryEvent
from memwell.memories.record import MemoryRecord

UNSET: object = object()


async def set_retention_flags(
    session: AsyncSession,
    *,
    tenant: str,
    memory_id: uuid.UUID,
    pinned: bool | None = None,
    expires_at: datetime | None | object = UNSET,
) -> MemoryRecord:
    """Set `pinned` and/or `expires_at` (None clears it) on one live memory of the
    tenant; the caller commits."""
    if pinned is None and expires_at is UNSET:
        raise InvalidInput("set at least one of pinned, expires_at")
    memory = await session.scalar(
        select(Memory)
        .where(Memory.tenant == tenant, Memory.id == memory_id, Memory.deleted_at.is_(None))
        .with_for_update()
    )
    if memory is None:
        raise NotFound(f"memory {memory_id} not found")
    changes = []
    if pinned is not None:
        memory.pinned = pinned
        changes.append(f"pinned={str(pinned).lower()}")
    if expires_at is not UNSET:
        assert expires_at is None or isinstance(expires_at, datetime)
        memory.expires_at = expires_at
        changes.append(f"expires_at={expires_at.isoformat() if expires_at else 'none'}")
    await session.execute(
        insert(MemoryEvent).values(
            tenant=tenant,
            user_id=memory.user_id,
            memory_id=memory.id,
            event="update",
            old_content=memory.content,
            new_content=memory.content,
            reason="retention: " + ", ".join(changes),
        )
    )
    await session.flush()
    await session.refresh(memory)
    return MemoryRecord.of(memory)
