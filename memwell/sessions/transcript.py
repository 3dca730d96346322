"""A session's transcript: every turn of it, stored and buffered, oldest first; and
clearing it, whole or turn by turn.

Chat histories of agent frameworks (LangChain's message history, the OpenAI Agents
SDK's Session) read and trim a conversation, not memories. The transcript is the
union of the turns table and the Redis buffer, each turn once (a turn sent through
the chat path may sit in the buffer before its row lands). Clearing deletes turns
and, for a whole session, its buffer and row; the memories the turns already
produced stay, as when a session is deleted without `with_memories`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from memwell.buffer.session_buffer import SessionBuffer
from memwell.db.models import ChatSession, Turn
from memwell.intake.dropped_turns import SESSION_CLEARED, record_dropped
from memwell.memories.erasure import lock_users
from memwell.sessions.fence import fence_in_flight

MAX_TRANSCRIPT: Final = 1000


class TranscriptTurn(BaseModel):
    """One turn: `stored` when its row is in Postgres (with its consolidation
    `status`), else only in the session's buffer."""

    model_config = ConfigDict(frozen=True)

    turn_id: str
    role: str
    content: str
    created_at: datetime
    stored: bool
    status: Literal["pending", "processed", "failed", "dropped"] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Transcript(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "user_id": "u1",
                    "session_id": "s-42",
                    "turns": [
                        {
                            "turn_id": "t-1", "role": "user", "content": "I moved to Lisbon.",
                            "created_at": "2026-03-01T09:40:10Z", "stored": True,
                            "status": "processed", "metadata": {},
                        }
                    ],
                }
            ]
        },
    )  # fmt: skip

    user_id: str
    session_id: str
    turns: list[TranscriptTurn] = Field(description="Oldest first; the newest `limit` turns.")


class TranscriptCleared(BaseModel):
    model_config = ConfigDict(frozen=True)

    user_id: str
    session_id: str
    counts: dict[str, int] = Field(description="Rows and Redis keys deleted, per store.")


def _instant(value: str) -> datetime:
    when = datetime.fromisoformat(value)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


async def read_transcript(
    session: AsyncSession,
    *,
    buffer: SessionBuffer,
    tenant: str,
    user_id: str,
    session_id: str,
    limit: int = MAX_TRANSCRIPT,
) -> Transcript:
    """The session's newest `limit` turns, oldest first, stored and buffered merged by
    turn id (the stored row wins); an unknown session has an empty transcript."""
    size = max(1, min(limit, MAX_TRANSCRIPT))
    rows = (
        await session.scalars(
            select(Turn)
            .where(Turn.tenant == tenant, Turn.user_id == user_id, Turn.session_id == session_id)
            .order_by(Turn.created_at.desc(), Turn.seq.desc())
            .limit(size)
        )
    ).all()
    snapshot = await buffer.read(tenant, user_id, session_id)
    keyed: list[tuple[tuple[datetime, float, int], TranscriptTurn]] = [
        (
            (row.created_at, float(row.seq), 0),
            TranscriptTurn(
                turn_id=row.id, role=row.role, content=row.content, created_at=row.created_at,
                stored=True, status=row.status,
                metadata=dict(row.metadata_ or {}),
            ),
        )
        for row in rows
    ]  # fmt: skip
    seen = {row.id for row in rows}
    for position, turn in enumerate(snapshot.turns):
        if turn.turn_id in seen:
            continue
        at = _instant(turn.created_at)
        keyed.append(
            (
                (at, math.inf, position),
                TranscriptTurn(
                    turn_id=turn.turn_id, role=turn.role, content=turn.content, created_at=at,
                    stored=False,
                ),
            )
        )  # fmt: skip
    keyed.sort(key=lambda pair: pair[0])
    return Transcript(user_id=user_id, session_id=session_id, turns=[t for _, t in keyed][-size:])


async def clear_transcript(
    session: AsyncSession,
    *,
    buffer: SessionBuffer,
    tenant: str,
    user_id: str,
    session_id: str,
    turn_ids: Sequence[str] = (),
) -> TranscriptCleared:
    """Delete the named turns of the session (stored, buffered, or still on their way),
    or with none named the whole session (turns, row, buffer, and the turns in
    flight); commits. Memories already made from them stay."""
    async with session.begin():
        # The erasure lock, exclusive: a persist of this user's turns in flight lands
        # wholly before (and is deleted) or after (and is dropped by the fence, or,
        # acknowledged after the clear, starts the session afresh).
        await session.run_sync(lambda s: lock_users(s, tenant, [user_id], shared=False))
        where = [Turn.tenant == tenant, Turn.user_id == user_id, Turn.session_id == session_id]
        if turn_ids:
            where.append(Turn.id.in_(list(turn_ids)))
        turns = (await session.scalars(delete(Turn).where(*where).returning(Turn.id))).all()
        # A cleared turn stays dropped: a resend, or a summary request naming it, finds so.
        await session.run_sync(
            lambda s: record_dropped(s, tenant=tenant, turn_ids=turns, reason=SESSION_CLEARED)
        )
        counts = {"turns": len(turns), "sessions": 0, "redis_keys": 0}
        counts["turns_in_flight"] = await fence_in_flight(
            session, tenant=tenant, user_id=user_id, session_id=session_id, turn_ids=turn_ids
        )
        # Redis before the commit: if it fails, the rows stay for the client's retry.
        if turn_ids:
            counts["buffered_turns"] = await buffer.remove(tenant, user_id, session_id, turn_ids)
        else:
            sessions = await session.scalars(
                delete(ChatSession)
                .where(
                    ChatSession.tenant == tenant,
                    ChatSession.user_id == user_id,
                    ChatSession.id == session_id,
                )
                .returning(ChatSession.id)
            )
            counts["sessions"] = len(sessions.all())
            counts["redis_keys"] = await buffer.clear(tenant, user_id, session_id)
    return TranscriptCleared(user_id=user_id, session_id=session_id, counts=counts)
