"""A user's sessions: list them, read one (stored row and Redis buffer), close one
now, delete one.

Every query names the tenant, so a session id guessed across tenants is simply not
found. The list is keyset-paged on (last_activity_at, id), newest activity first, and
reads one user's rows by the sessions primary key (tenant, user_id, id).
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from datetime import datetime
from typing import Any, Final

from pydantic import TypeAdapter
from sqlalchemy import ColumnElement, func, select, tuple_
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from memwell.buffer.session_buffer import SessionBuffer
from memwell.core.cursor import decode_cursor, encode_cursor
from memwell.core.errors import InvalidCursor, NotFound
from memwell.db.models import ChatSession, Turn
from memwell.intake.turns import Identifier
from memwell.maintenance.sessions import summarize_and_close
from memwell.sessions.deletion import delete_session_rows
from memwell.sessions.fence import fence_in_flight
from memwell.sessions.records import (
    BufferTurnView,
    BufferView,
    SessionDeletion,
    SessionDetail,
    SessionItem,
    SessionPage,
    Status,
)

MAX_PAGE: Final = 500
EXCERPT_CHARS: Final = 200
TURN_IDS_SHOWN: Final = 200
#: A cursor's id passes the rule of an id in a request: Postgres refuses NUL with a 500.
IDENTIFIER: Final = TypeAdapter(Identifier)


def _the_session(tenant: str, user_id: str, session_id: str) -> list[ColumnElement[bool]]:
    return [
        ChatSession.tenant == tenant,
        ChatSession.user_id == user_id,
        ChatSession.id == session_id,
    ]


def _its_turns(tenant: str, user_id: str, session_id: str) -> list[ColumnElement[bool]]:
    return [Turn.tenant == tenant, Turn.user_id == user_id, Turn.session_id == session_id]


def _after(key: list[Any]) -> ColumnElement[bool]:
    """Rows after the cursor's (last_activity_at, id) in the list's descending order."""
    try:
        at, session_id = datetime.fromisoformat(key[0]), IDENTIFIER.validate_python(key[1])
    except (IndexError, TypeError, ValueError) as exc:  # pydantic's errors are ValueErrors
        raise InvalidCursor("malformed cursor") from exc
    if len(key) != 2 or at.tzinfo is None:
        raise InvalidCursor("malformed cursor")
    return tuple_(ChatSession.last_activity_at, ChatSession.id) < tuple_(at, session_id)


def _status(value: str) -> Status:
    return "closed" if value == "closed" else "open"


def _excerpt(summary: str | None) -> str | None:
    if summary is None or len(summary) <= EXCERPT_CHARS:
        return summary
    return summary[: EXCERPT_CHARS - 1] + "…"


async def list_sessions(
    session: AsyncSession, *, tenant: str, user_id: str, limit: int = 50, cursor: str | None
) -> SessionPage:
    """One page of the user's sessions, newest activity first."""
    scope = {"list": "sessions", "tenant": tenant, "user": user_id}
    conditions = [ChatSession.tenant == tenant, ChatSession.user_id == user_id]
    if cursor is not None:
        conditions.append(_after(decode_cursor(cursor, scope)))
    size = max(1, min(limit, MAX_PAGE))
    # Columns, not the entity: long summaries and the folded turn ids stay in the
    # database. One character past the excerpt says whether it was cut.
    rows = (
        await session.execute(
            select(
                ChatSession.id,
                ChatSession.status,
                ChatSession.turn_count,
                ChatSession.created_at,
                ChatSession.last_activity_at,
                ChatSession.closed_at,
                func.left(ChatSession.summary, EXCERPT_CHARS + 1).label("head"),
            )  # fmt: skip
            .where(*conditions)
            .order_by(ChatSession.last_activity_at.desc(), ChatSession.id.desc())
            .limit(size + 1)
        )
    ).all()
    page = [
        SessionItem(
            id=r.id,
            user_id=user_id,
            status=_status(r.status),
            turn_count=r.turn_count,
            created_at=r.created_at,
            last_activity_at=r.last_activity_at,
            closed_at=r.closed_at,
            summary_excerpt=_excerpt(r.head),
        )
        for r in rows[:size]
    ]
    last = page[-1] if len(rows) > size else None
    next_cursor = (
        encode_cursor(scope, [last.last_activity_at.isoformat(), last.id]) if last else None
    )
    return SessionPage(sessions=page, next_cursor=next_cursor)


async def _stored(
    session: AsyncSession, tenant: str, user_id: str, session_id: str
) -> tuple[ChatSession | None, list[str]]:
    # Not the folded turn ids: they grow with the session and nobody reads them here.
    row = await session.scalar(
        select(ChatSession)
        .where(*_the_session(tenant, user_id, session_id))
        .options(defer(ChatSession.summarized_turn_ids))
    )
    turn_ids = await session.scalars(
        select(Turn.id)
        .where(*_its_turns(tenant, user_id, session_id))
        .order_by(Turn.created_at.desc(), Turn.seq.desc())
        .limit(TURN_IDS_SHOWN)
    )
    return row, list(turn_ids.all())


async def get_session(
    session: AsyncSession, *, buffer: SessionBuffer, tenant: str, user_id: str, session_id: str
) -> SessionDetail:
    """The session's row, its newest persisted turn ids and its Redis buffer."""
    (row, turn_ids), snapshot = await asyncio.gather(
        _stored(session, tenant, user_id, session_id), buffer.read(tenant, user_id, session_id)
    )
    buffered = bool(snapshot.turns) or snapshot.summary is not None
    if row is None and not turn_ids and not buffered:
        raise NotFound(f"session {session_id!r} of user {user_id!r} not found")
    view = BufferView(
        turns=[BufferTurnView(**asdict(t)) for t in snapshot.turns],
        total_tokens=snapshot.total_tokens,
        summary=snapshot.summary,
    )
    if row is not None:
        return SessionDetail(
            id=row.id, user_id=row.user_id, status=_status(row.status), summary=row.summary,
            summary_updated_at=row.summary_updated_at, turn_count=row.turn_count,
            created_at=row.created_at, last_activity_at=row.last_activity_at,
            closed_at=row.closed_at, turn_ids=turn_ids, buffer=view,
        )  # fmt: skip
    count, first, last = (
        await session.execute(
            select(func.count(), func.min(Turn.created_at), func.max(Turn.created_at)).where(
                *_its_turns(tenant, user_id, session_id)
            )
        )
    ).one()
    return SessionDetail(
        id=session_id, user_id=user_id, status="open", summary=None, summary_updated_at=None,
        turn_count=count, created_at=first, last_activity_at=last, closed_at=None,
        turn_ids=turn_ids, buffer=view,
    )  # fmt: skip


async def _lock_row(
    session: AsyncSession, buffer: SessionBuffer, tenant: str, user_id: str, session_id: str
) -> str:
    """Lock the session's row and return its status, making the row first if only its
    turns or buffer exist (turns on their way to Postgres); NotFound when there is
    nothing of it at all."""
    where = _the_session(tenant, user_id, session_id)
    status = await session.scalar(select(ChatSession.status).where(*where).with_for_update())
    if status is not None:
        return status
    count, last = (
        await session.execute(
            select(func.count(), func.max(Turn.created_at)).where(
                *_its_turns(tenant, user_id, session_id)
            )
        )
    ).one()
    snapshot = await buffer.read(tenant, user_id, session_id)
    if not count and not snapshot.turns and snapshot.summary is None:
        raise NotFound(f"session {session_id!r} of user {user_id!r} not found")
    stmt = insert(ChatSession).values(
        tenant=tenant, user_id=user_id, id=session_id, turn_count=count,
        last_activity_at=last if last is not None else func.now(),
    )  # fmt: skip
    await session.execute(stmt.on_conflict_do_nothing(index_elements=["tenant", "user_id", "id"]))
    return (
        await session.execute(select(ChatSession.status).where(*where).with_for_update())
    ).scalar_one()


async def close_session(
    session: AsyncSession, *, buffer: SessionBuffer, tenant: str, user_id: str, session_id: str
) -> SessionDetail:
    """Summarize and close the session now, as the idle job does, then empty its buffer.
    A closed session has had no turn since it closed: closing it again changes nothing."""
    async with session.begin():
        if await _lock_row(session, buffer, tenant, user_id, session_id) == "open":
            now: datetime = (await session.execute(select(func.now()))).scalar_one()
            await session.run_sync(
                lambda s: summarize_and_close(
                    s, tenant=tenant, user_id=user_id, session_id=session_id, now=now
                )
            )
    # After the commit, as the idle job: if the commit fails, the buffer still serves.
    # A turn still on its way to Postgres reopens the session when it lands.
    await buffer.clear(tenant, user_id, session_id)
    return await get_session(
        session, buffer=buffer, tenant=tenant, user_id=user_id, session_id=session_id
    )


async def delete_session(
    session: AsyncSession,
    *,
    buffer: SessionBuffer,
    tenant: str,
    user_id: str,
    session_id: str,
    with_memories: bool = False,
) -> SessionDeletion:
    """Delete the session's buffer, turns and row (and its memories if asked), and drop
    its turns still in flight when they arrive; commits."""
    async with session.begin():
        deleted_at, counts = await session.run_sync(
            lambda s: delete_session_rows(
                s, tenant=tenant, user_id=user_id, session_id=session_id,
                with_memories=with_memories,
            )
        )  # fmt: skip
        counts["turns_in_flight"] = await fence_in_flight(
            session, tenant=tenant, user_id=user_id, session_id=session_id
        )
        # Before the commit, as in erasure: if Redis fails, the rows stay for a retry.
        counts["redis_keys"] = await buffer.clear(tenant, user_id, session_id)
        if not any(counts.values()):
            raise NotFound(f"session {session_id!r} of user {user_id!r} not found")
    return SessionDeletion(
        tenant=tenant, user_id=user_id, session_id=session_id, deleted_at=deleted_at,
        counts=counts,
    )  # fmt: skip
