"""Step 1: persist accepted turns, idempotently on (tenant, turn id)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from sqlalchemy import func
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memwell.core.tokens import count_tokens
from memwell.db.models import ChatSession, Turn
from memwell.intake.dropped_turns import USER_ERASED, dropped_among, record_dropped
from memwell.intake.turns import IngestPayload, TurnIn
from memwell.memories.erasure import erasures_of, lock_users

log = logging.getLogger(__name__)


def persist_turns(session: Session, payload: IngestPayload) -> list[str]:
    """Insert the payload's turns; a turn id seen before is left untouched.

    Returns the ids that were new. Session counters move only by new turns, so a
    redelivered task changes nothing. Turns of an erased user that predate the
    erasure (they were queued before it), and turns a session clear found still in
    flight, are dropped, never stored (memwell/intake/dropped_turns.py).
    """
    received = datetime.now(UTC)
    # Shared per-user locks until commit: an erasure or a session clear (exclusive)
    # waits for us, and we never read a tombstone or a fence about to be written.
    lock_users(session, payload.tenant, {t.user_id for t in payload.turns}, shared=True)
    payload = drop_erased(session, payload, received=received)
    payload = drop_fenced(session, payload)
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
    erasure; those are recorded as dropped. Call under the users' shared locks."""
    erased = erasures_of(session, payload.tenant, {t.user_id for t in payload.turns})
    if not erased:
        return payload
    kept = [
        t
        for t in payload.turns
        if t.user_id not in erased or (t.created_at or received) > erased[t.user_id]
    ]
    return _without(session, payload, kept, reason=USER_ERASED)


def drop_fenced(session: Session, payload: IngestPayload) -> IngestPayload:
    """The payload without turns already recorded as dropped: those a session clear
    found in flight, and redeliveries of turns dropped before."""
    dropped = dropped_among(session, tenant=payload.tenant, turn_ids=[t.id for t in payload.turns])
    if not dropped:
        return payload
    kept = [t for t in payload.turns if t.id not in dropped]
    return _without(session, payload, kept, reason=None)


def _without(
    session: Session, payload: IngestPayload, kept: list[TurnIn], *, reason: str | None
) -> IngestPayload:
    """The payload holding only `kept`; the rest are recorded as dropped for `reason`
    (None: they already are)."""
    if len(kept) == len(payload.turns):
        return payload
    kept_ids = {t.id for t in kept}
    gone = [t.id for t in payload.turns if t.id not in kept_ids]
    if reason is not None:
        record_dropped(session, tenant=payload.tenant, turn_ids=gone, reason=reason)
    log.info(
        "dropped %d queued turns (%s, tenant %s)", len(gone), reason or "fenced", payload.tenant
    )
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
