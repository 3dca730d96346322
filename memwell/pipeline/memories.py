"""A candidate memory, and its insert with exact dedup.

An exact duplicate (same normalised content for the same user) reinforces the live
memory instead of adding a row: its reinforcement count and last-seen time move,
and its provenance gains the new turn ids. Near duplicates and changed facts are
memwell/pipeline/reconcile.py's job, which calls this for every row it writes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import func, literal_column, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memwell.db.models import Memory
from memwell.text import content_hash


@dataclass(frozen=True)
class Candidate:
    """A memory about to be stored."""

    tenant: str
    user_id: str
    session_id: str | None
    kind: str
    content: str
    importance: float
    event_time: datetime
    source_turn_ids: list[str]
    agent_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def upsert_memory(
    session: Session, c: Candidate, embedding: np.ndarray, model: str
) -> tuple[uuid.UUID, bool]:
    """Insert the memory, or reinforce the live one with the same normalised content.

    Returns (id, added): added is False when an existing memory was reinforced."""
    stmt = insert(Memory).values(
        tenant=c.tenant,
        user_id=c.user_id,
        agent_id=c.agent_id,
        session_id=c.session_id,
        kind=c.kind,
        content=c.content,
        content_hash=content_hash(c.content),
        embedding=embedding,
        embedding_model=model,
        importance=c.importance,
        created_at=c.event_time,
        updated_at=func.now(),
        valid_from=c.event_time,
        last_seen_at=c.event_time,
        source_turn_ids=c.source_turn_ids,
        metadata_=c.metadata,
    )
    excluded = stmt.excluded
    stmt = stmt.on_conflict_do_update(
        index_elements=["tenant", "user_id", "content_hash"],
        index_where=text("deleted_at IS NULL AND superseded_by IS NULL"),
        set_={
            "reinforcement_count": Memory.reinforcement_count + 1,
            "last_seen_at": func.greatest(Memory.last_seen_at, excluded.last_seen_at),
            "importance": func.greatest(Memory.importance, excluded.importance),
            "updated_at": func.now(),
            "source_turn_ids": func.array(
                text("SELECT DISTINCT unnest(memories.source_turn_ids || excluded.source_turn_ids)")
            ),
        },
    )
    # xmax = 0 only on a freshly inserted row version: tells insert from update.
    row: Any = session.execute(
        stmt.returning(Memory.id, literal_column("(xmax = 0)").label("added"))
    ).one()
    return row.id, bool(row.added)
