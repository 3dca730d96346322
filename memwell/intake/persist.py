"""Step 1: persist accepted turns, idempotently on (tenant, turn id)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from sqlalchemy import func
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memwell.core.tokens import count_tokens
from memwell.db.models import ChatSession, Turn
from memwell.intake.turns import IngestPayload
from memwell.memories.erasure import erasures_of, lock_users

log = logging.getLogger(__name__)


def persist_turns(session: Session, payload: IngestPayload) -> list[str]:
    """Insert the payload's turns; a turn id seen before is left untouched.

    Returns the ids that were new. Session counters move only by new turns, so a
    redelivered task changes nothing. Turns of an erased user that predate the
    erasure (they were queued before it) are dropped, never stored.
    """
    received = datetime.now(UTC)
    payload = drop_erased(session, payload, received=received)
    if not payload.turns:
        return []
    rows = [
        {
            "tenant": payload.tenant,
            "id": t.id,
            "user_id": t.user_id,
            "session_id": t.session_id,
            "role": t.role,
            "content": t.content,
            "created_at": t.created_at or received,
            "received_at": received,
            "token_count": count_tokens(t.content),
            "metadata": t.metadata,
        }
        for t in payload.turns
    ]
    stmt = insert(Turn).values(rows).on_conflict_do_nothing(index_elements=["tenant", "id"])
    inserted = set(session.scalars(stmt.returning(Turn.id)).all())
    _touch_sessions(session, payload, inserted)
    return [t.id for t in payload.turns if t.id in inserted]


def drop_erased(session: Session, payload: IngestPayload, *, received: datetime) -> IngestPayload:
    """The payload without turns of erased users whose event time is not after the
    erasure. Holds shared per-user locks until commit, so an erasure waits for us and
    we never read a tombstone that is about to be written."""
    users = {t.user_id for t in payload.turns}
    lock_users(session, payload.tenant, users, shared=True)
    erased = erasures_of(session, payload.tenant, users)
    if not erased:
        return payload
    kept = [
        t
        for t in payload.turns
        if t.user_id not in erased or (t.created_at or received) > erased[t.user_id]
    ]
    dropped = len(payload.turns) - len(kept)
    log.info("dropped %d queued turns of erased users (tenant %s)", dropped, payload.tenant)
    return payload.model_copy(update={"turns": kept})


def _touch_sessions(session: Session, payload: IngestPayload, inserted: set[str]) -> None:
    counts: dict[tuple[str, str], tuple[int, datetime]] = {}
    for t in payload.turns:
        if t.id not in inserted:
            continue
        key = (t.user_id, t.session_id)
        n, last = counts.get(key, (0, datetime.min.replace(tzinfo=UTC)))
        counts[key] = (n + 1, max(last, t.created_at or datetime.now(UTC)))
    if not counts:
        return
    rows = [
        {
            "tenant": payload.tenant,
            "user_id": user_id,
            "id": session_id,
            "turn_count": n,
            "last_activity_at": last,
        }
        for (user_id, session_id), (n, last) in sorted(counts.items())
    ]
    stmt = insert(ChatSession).values(rows)
    stmt = stmt.on_conflict_do_update(
        index_elements=["tenant", "user_id", "id"],
        set_={
            "turn_count": ChatSession.turn_count + stmt.excluded.turn_count,
            "last_activity_at": func.greatest(
                ChatSession.last_activity_at, stmt.excluded.last_activity_at
            ),
            # A new turn in a session the idle job closed resumes it: it will be
            # summarized and closed again when it next goes idle.
            "status": "open",
            "closed_at": None,
        },
    )
    session.execute(stmt)
