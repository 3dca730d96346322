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

A summary may cost a model call, so a batch stops early and keeps what it closed: when
the task's time is spent (the next task continues after the last session closed), and
when the shared model budget is (the sessions left stay open for the next beat tick).
Each session's work runs in a savepoint, so the one a stop interrupts leaves nothing
half done.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import func, select, tuple_, update
from sqlalchemy.orm import Session, sessionmaker

from memwell.buffer.session_buffer import SyncSessionBuffer
from memwell.db.models import ChatSession, Turn
from memwell.embeddings import Embedder
from memwell.llm.provider_rate_limit import RateLimited
from memwell.maintenance.batches import BatchResult, Cursor, JobReport, run_batches
from memwell.pipeline.summarize import Summarizer, close_session

SUMMARY_TURNS = 5
SUMMARY_TURN_CHARS = 240
_EPOCH = "1970-01-01T00:00:00+00:00"
_START: Cursor = [_EPOCH, "", "", ""]


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
    deadline: float | None = None,
) -> BatchResult:
    """Close up to `batch_size` sessions idle since before `now - idle`; stop early
    at `deadline` (time.monotonic()) or when the model budget is spent."""
    cutoff = now - idle
    after = cursor or _START
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
    handled = 0  # rows walked past: the cursor of a stop
    stopped = ""
    for row in rows:
        key = SessionKey(row.tenant, row.user_id, row.id)
        if deadline is not None and time.monotonic() >= deadline:
            stopped = "out_of_time"
            break
        if _buffer_is_fresh(buffer, key, cutoff):
            still_active += 1
            handled += 1
            continue
        try:
            with session.begin_nested():
                summarize(
                    session, tenant=key.tenant, user_id=key.user_id,
                    session_id=key.session_id, now=now,
                )  # fmt: skip
        except RateLimited:
            stopped = "rate_limited"
            break
        closed.append(key)
        handled += 1

    def flush() -> None:
        if buffer is not None:
            for key in closed:
                buffer.clear(key.tenant, key.user_id, key.session_id)

    counts = {"closed": len(closed), "left_open_active_buffer": still_active}
    if stopped == "rate_limited":
        # The rest stays open, idle: the next tick's walk finds it again.
        counts["left_open_rate_limited"] = len(rows) - handled
        return BatchResult(counts=counts, cursor=None, after_commit=flush, stop=True)
    if stopped:
        counts["left_open_out_of_time"] = len(rows) - handled
        return BatchResult(
            counts=counts,
            cursor=_key_cursor(rows[handled - 1]) if handled else (cursor or _START),
            after_commit=flush,
            stop=True,
        )
    last = rows[-1] if rows else None
    return BatchResult(
        counts=counts,
        cursor=None if last is None or len(rows) < batch_size else _key_cursor(last),
        after_commit=flush,
    )


def _key_cursor(row: Any) -> Cursor:
    return [row.last_activity_at.isoformat(), row.tenant, row.user_id, row.id]


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
    deadline: float | None = None,
) -> JobReport:
    """Summarize, close and flush every session idle for longer than `idle`, until
    `deadline` (time.monotonic())."""
    return run_batches(
        sessions,
        partial(
            close_idle_batch,
            now=now,
            idle=idle,
            buffer=buffer,
            batch_size=batch_size,
            summarize=summarize,
            deadline=deadline,
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
