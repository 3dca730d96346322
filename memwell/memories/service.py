"""One memory by id: read it, tombstone it, read its history.

Every query names the tenant, so an id guessed across tenants is simply not found.
Delete is a tombstone (`deleted_at`) plus a 'delete' event; the prune job hard-deletes
after a grace period, and the history outlives the row.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from memwell.core.errors import NotFound
from memwell.db.models import Memory, MemoryEvent
from memwell.memories.erasure import REDACTED, redact_memory_history


@dataclass(frozen=True)
class MemoryRecord:
    id: uuid.UUID
    user_id: str
    agent_id: str | None
    session_id: str | None
    kind: str
    content: str
    importance: float
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime | None
    access_count: int
    valid_from: datetime | None
    valid_to: datetime | None
    superseded_by: uuid.UUID | None
    deleted_at: datetime | None
    embedding_model: str | None
    source_turn_ids: list[str]
    metadata: dict[str, Any]


@dataclass(frozen=True)
class HistoryEvent:
    id: int
    event: str
    old_content: str | None
    new_content: str | None
    related_memory_id: uuid.UUID | None
    source_turn_ids: list[str]
    reason: str | None
    created_at: datetime


def _record(m: Memory) -> MemoryRecord:
    return MemoryRecord(
        id=m.id, user_id=m.user_id, agent_id=m.agent_id, session_id=m.session_id,
        kind=m.kind, content=m.content, importance=m.importance, created_at=m.created_at,
        updated_at=m.updated_at, last_accessed_at=m.last_accessed_at,
        access_count=m.access_count, valid_from=m.valid_from, valid_to=m.valid_to,
        superseded_by=m.superseded_by, deleted_at=m.deleted_at,
        embedding_model=m.embedding_model, source_turn_ids=list(m.source_turn_ids),
        metadata=dict(m.metadata_ or {}),
    )  # fmt: skip


async def _load(session: AsyncSession, tenant: str, memory_id: uuid.UUID) -> Memory:
    memory = await session.scalar(
        select(Memory).where(Memory.tenant == tenant, Memory.id == memory_id)
    )
    if memory is None:
        raise NotFound(f"memory {memory_id} not found")
    return memory


async def get_memory(session: AsyncSession, *, tenant: str, memory_id: uuid.UUID) -> MemoryRecord:
    """The memory, including a tombstoned or superseded one (say so in its fields)."""
    return _record(await _load(session, tenant, memory_id))


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
    return _record(memory)


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
    return [
        HistoryEvent(
            id=e.id, event=e.event, old_content=e.old_content, new_content=e.new_content,
            related_memory_id=e.related_memory_id, source_turn_ids=list(e.source_turn_ids),
            reason=e.reason, created_at=e.created_at,
        )
        for e in rows
    ]  # fmt: skip
