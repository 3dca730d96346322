"""close-idle: summarize each session idle for longer than N minutes, flush its
Redis buffer and mark it closed.

The per-session work sits behind one function, `summarize_and_close`, so a richer
summarizer (LLM mode, a `summary` memory) replaces the local one in one place. The
local summary is extractive: the session's most important user turns, in the order
they were said.

Sessions are walked by (last_activity_at, key) and locked with SKIP LOCKED; a turn
persisted meanwhile waits on that lock and then reopens the session (persist.py). The
buffer is flushed only after the commit, and a session whose buffer holds a turn newer
than the idle cutoff is left open: that turn is on its way to Postgres.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select, tuple_, update
from sqlalchemy.orm import Session, sessionmaker

from memwell.buffer.session_buffer import SyncSessionBuffer
from memwell.db.models import ChatSession, Turn
from memwell.embeddings import Embedder
from memwell.maintenance.batches import BatchResult, Cursor, JobReport, run_batches
from memwell.pipeline.summarize import Summarizer, close_session

SUMMARY_TURNS = 5
SUMMARY_TURN_CHARS = 240
_EPOCH = "1970-01-01T00:00:00+00:00"


@dataclass(frozen=True)
class SessionKey:
    tenant: str
    user_id: str
    session_id: str


def extractive_summary(session: Session, *, key: SessionKey, limit: int = SUMMARY_TURNS) -> str:
    """The session's `limit` most important user turns, in the order they were said."""
    turns = session.execute(
        select(Turn.content, Turn.created_at)
        .where(
            Turn.tenant == key.tenant,
            Turn.user_id == key.user_id,
            Turn.session_id == key.session_id,
            Turn.role == "user",
        )
        .order_by(func.coalesce(Turn.importance, 0.5).desc(), Turn.created_at.desc())
        .limit(limit)
    ).all()
    lines = []
    for content, _ in sorted(turns, key=lambda t: t.created_at):
        text = " ".join(content.split())
        if len(text) > SUMMARY_TURN_CHARS:
            text = text[: SUMMARY_TURN_CHARS - 1] + "…"
        lines.append(f"- {text}")
    return "\n".join(lines)


def summarize_and_close(
    session: Session, *, tenant: str, user_id: str, session_id: str, now: datetime
) -> str:
    """Write the session's summary and mark it closed (the caller commits); returns
    the summary. The one seam for a richer summarizer."""
    key = SessionKey(tenant, user_id, session_id)
    summary = extractive_summary(session, key=key)
    session.execute(
        update(ChatSession)
        .where(
            ChatSession.tenant == tenant,
            ChatSession.user_id == user_id,
            ChatSession.id == session_id,
        )
        .values(
            status="closed",
            closed_at=now,
            summary=summary or None,
            summary_updated_at=now,
        )
    )
    return summary


def _buffer_is_fresh(buffer: SyncSessionBuffer | None, key: SessionKey, cutoff: datetime) -> bool:
    """True when the buffer holds a turn said after the cutoff (not yet persisted)."""
    if buffer is None:
        return False
    snapshot = buffer.read(key.tenant, key.user_id, key.session_id)
    for turn in snapshot.turns:
        try:
            said = datetime.fromisoformat(turn.created_at)
        except ValueError:
            continue
        if said.tzinfo is None:  # the buffer's writers use UTC
            said = said.replace(tzinfo=UTC)
        if said > cutoff:
            return True
    return False


def close_idle_batch(
    session: Session,
    cursor: Cursor | None,
    *,
    now: datetime,
    idle: timedelta,
    buffer: SyncSessionBuffer | None,
    batch_size: int,
    summarize: Callable[..., str] = summarize_and_close,
) -> BatchResult:
    """Close up to `batch_size` sessions idle since before `now - idle`."""
    cutoff = now - idle
    after = cursor or [_EPOCH, "", "", ""]
    after_at = datetime.fromisoformat(after[0])
    rows = session.execute(
        select(
            ChatSession.last_activity_at, ChatSession.tenant, ChatSession.user_id, ChatSession.id
        )
        .where(
            ChatSession.status == "open",
            ChatSession.last_activity_at < cutoff,
            tuple_(
                ChatSession.last_activity_at,
                ChatSession.tenant,
                ChatSession.user_id,
                ChatSession.id,
            )
            > tuple_(after_at, after[1], after[2], after[3]),
        )
        .order_by(
            ChatSession.last_activity_at, ChatSession.tenant, ChatSession.user_id, ChatSession.id
        )
        .limit(batch_size)
        .with_for_update(skip_locked=True)
    ).all()
    closed: list[SessionKey] = []
    still_active = 0
    for row in rows:
        key = SessionKey(row.tenant, row.user_id, row.id)
        if _buffer_is_fresh(buffer, key, cutoff):
            still_active += 1
            continue
        summarize(
            session, tenant=key.tenant, user_id=key.user_id, session_id=key.session_id, now=now
        )
        closed.append(key)

    def flush() -> None:
        if buffer is not None:
            for key in closed:
                buffer.clear(key.tenant, key.user_id, key.session_id)

    last = rows[-1] if rows else None
    return BatchResult(
        counts={"closed": len(closed), "left_open_active_buffer": still_active},
        cursor=None
        if last is None or len(rows) < batch_size
        else [last.last_activity_at.isoformat(), last.tenant, last.user_id, last.id],
        after_commit=flush,
    )


def close_idle_sessions(
    sessions: sessionmaker[Session],
    *,
    now: datetime,
    idle: timedelta,
    buffer: SyncSessionBuffer | None,
    batch_size: int,
    max_batches: int,
    dry_run: bool = False,
    cursor: Cursor | None = None,
    summarize: Callable[..., str] = summarize_and_close,
) -> JobReport:
    """Summarize, close and flush every session idle for longer than `idle`."""
    return run_batches(
        sessions,
        lambda s, c: close_idle_batch(
            s, c, now=now, idle=idle, buffer=buffer, batch_size=batch_size, summarize=summarize
        ),
        job="close-idle",
        max_batches=max_batches,
        dry_run=dry_run,
        cursor=cursor,
    )


def summary_memory_closer(embedder: Embedder, summarizer: Summarizer) -> Callable[..., str]:
    """A `summarize` for close_idle_batch that uses the consolidation pipeline's
    summarizer and leaves the summary as a `summary` memory (pipeline/summarize.py)."""

    def close(
        session: Session, *, tenant: str, user_id: str, session_id: str, now: datetime
    ) -> str:
        close_session(
            session, embedder, summarizer, tenant=tenant, user_id=user_id, session_id=session_id
        )
        summary = session.scalar(
            select(ChatSession.summary).where(
                ChatSession.tenant == tenant,
                ChatSession.user_id == user_id,
                ChatSession.id == session_id,
            )
        )
        return summary or ""

    return close
