"""One memory as every door shows it, and one event of its history.

REST returns these models as they are, the SDK parses the same JSON, and the console
and MCP render them: a field added here shows up at every door at once.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from memwell.db.models import Memory, MemoryEvent


class MemoryRecord(BaseModel):
    """A memory with everything a client may read or set (a tombstoned or superseded
    one says so in `deleted_at` / `superseded_by`)."""

    model_config = ConfigDict(frozen=True)

    id: uuid.UUID
    user_id: str
    agent_id: str | None
    session_id: str | None
    kind: str
    content: str
    importance: float
    #: decays while unused (memwell/maintenance/decay.py); prune drops the weakest
    strength: float
    pinned: bool
    expires_at: datetime | None
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

    @classmethod
    def of(cls, m: Memory) -> MemoryRecord:
        return cls(
            id=m.id, user_id=m.user_id, agent_id=m.agent_id, session_id=m.session_id,
            kind=m.kind, content=m.content, importance=m.importance, strength=m.strength,
            pinned=m.pinned,
            expires_at=m.expires_at, created_at=m.created_at, updated_at=m.updated_at,
            last_accessed_at=m.last_accessed_at, access_count=m.access_count,
            valid_from=m.valid_from, valid_to=m.valid_to, superseded_by=m.superseded_by,
            deleted_at=m.deleted_at, embedding_model=m.embedding_model,
            source_turn_ids=list(m.source_turn_ids), metadata=dict(m.metadata_ or {}),
        )  # fmt: skip


class HistoryEvent(BaseModel):
    """One change of a memory: add, reinforce, merge, update, supersede, decay, delete."""

    model_config = ConfigDict(frozen=True)

    id: int
    event: str
    old_content: str | None
    new_content: str | None
    related_memory_id: uuid.UUID | None
    source_turn_ids: list[str]
    reason: str | None
    created_at: datetime

    @classmethod
    def of(cls, e: MemoryEvent) -> HistoryEvent:
        return cls(
            id=e.id, event=e.event, old_content=e.old_content, new_content=e.new_content,
            related_memory_id=e.related_memory_id, source_turn_ids=list(e.source_turn_ids),
            reason=e.reason, created_at=e.created_at,
        )  # fmt: skip


class MemoryHistory(BaseModel):
    memory_id: uuid.UUID
    events: list[HistoryEvent]
