"""Delete one session's rows: its turns, its `sessions` row and, if asked, the memories
it produced, the way erasure deletes a user's (memwell/memories/erasure.py).

The per-user erasure lock (exclusive, as erasure takes it) orders the delete against a
persist of the user's turns in flight, so a turn either lands before and is deleted, or
lands after: dropped if it was acknowledged before the delete (memwell/sessions/fence.py),
else starting the session afresh. Deleting memories also takes
reconciliation's per-user lock, so no merge or supersede is deciding about a memory
while it goes.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import case, delete, func, select, update
from sqlalchemy.orm import Session

from memwell.db.models import ChatSession, Memory, MemoryEvent, Turn
from memwell.intake.dropped_turns import SESSION_CLEARED, record_dropped
from memwell.memories.erasure import REDACTED, lock_users
from memwell.pipeline.user_lock import lock_users as lock_reconciliation


def delete_session_rows(
    session: Session, *, tenant: str, user_id: str, session_id: str, with_memories: bool
) -> tuple[datetime, dict[str, int]]:
    """Delete the session's rows in the caller's transaction, recording its turns as
    dropped; returns the time and the rows deleted per table."""
    lock_users(session, tenant, [user_id], shared=False)
    deleted_at: datetime = session.execute(select(func.clock_timestamp())).scalar_one()
    turns = session.scalars(
        delete(Turn)
        .where(Turn.tenant == tenant, Turn.user_id == user_id, Turn.session_id == session_id)
        .returning(Turn.id)
    ).all()
    # A deleted turn stays dropped: a resend, or a summary request naming it, finds so.
    record_dropped(session, tenant=tenant, turn_ids=turns, reason=SESSION_CLEARED)
    rows = session.scalars(
        delete(ChatSession)
        .where(
            ChatSession.tenant == tenant,
            ChatSession.user_id == user_id,
            ChatSession.id == session_id,
        )
        .returning(ChatSession.id)
    ).all()
    counts = {"turns": len(turns), "sessions": len(rows), "memories": 0, "memory_events": 0}
    if with_memories:
        lock_reconciliation(session, {(tenant, user_id)})
        counts.update(_delete_memories(session, tenant, user_id, session_id))
    return deleted_at, counts


def _delete_memories(
    session: Session, tenant: str, user_id: str, session_id: str
) -> dict[str, int]:
    ids = session.scalars(
        select(Memory.id).where(
            Memory.tenant == tenant, Memory.user_id == user_id, Memory.session_id == session_id
        )
    ).all()
    if not ids:
        return {"memories": 0, "memory_events": 0}
    _settle_superseded(session, tenant, user_id, ids)
    events = session.scalars(
        delete(MemoryEvent)
        .where(MemoryEvent.tenant == tenant, MemoryEvent.memory_id.in_(ids))
        .returning(MemoryEvent.id)
    ).all()
    # Events of the user's other memories that name a deleted one (a merge, a
    # supersede) may quote it: their text goes, the events stay, as in erasure.
    session.execute(
        update(MemoryEvent)
        .where(
            MemoryEvent.tenant == tenant,
            MemoryEvent.user_id == user_id,
            MemoryEvent.related_memory_id.in_(ids),
        )
        .values(
            old_content=case((MemoryEvent.old_content.is_(None), None), else_=REDACTED),
            new_content=case((MemoryEvent.new_content.is_(None), None), else_=REDACTED),
        )
    )
    memories = session.scalars(
        delete(Memory).where(Memory.tenant == tenant, Memory.id.in_(ids)).returning(Memory.id)
    ).all()
    return {"memories": len(memories), "memory_events": len(events)}


def _settle_superseded(
    session: Session, tenant: str, user_id: str, doomed: Sequence[uuid.UUID]
) -> None:
    """Memories of other sessions that a doomed memory superseded become live again
    (the foreign key sets `superseded_by` to NULL): what the deleted session said is
    gone, so what was known before it is current again. Only one live memory per
    content may exist, so where a live twin exists, or several revive with the same
    content, the rest stay superseded by the one that is live."""
    revived = session.execute(
        select(Memory.id, Memory.content_hash)
        .where(
            Memory.tenant == tenant,
            Memory.user_id == user_id,
            Memory.superseded_by.in_(doomed),
            Memory.id.not_in(doomed),
            Memory.deleted_at.is_(None),
        )
        .order_by(Memory.created_at.desc(), Memory.id)
    ).all()
    if not revived:
        return
    keepers: dict[str, uuid.UUID] = dict(
        session.execute(
            select(Memory.content_hash, Memory.id).where(
                Memory.tenant == tenant,
                Memory.user_id == user_id,
                Memory.content_hash.in_({h for _, h in revived}),
                Memory.deleted_at.is_(None),
                Memory.superseded_by.is_(None),
                Memory.id.not_in(doomed),
            )
        ).all()
    )
    for memory_id, digest in revived:  # newest first: the newest revived one is kept
        keeper = keepers.setdefault(digest, memory_id)
        if keeper != memory_id:
            session.execute(
                update(Memory)
                .where(Memory.tenant == tenant, Memory.id == memory_id)
                .values(superseded_by=keeper, updated_at=func.now())
            )
