"""The tenant's users, listed and one by one, with counts that stay cheap.

Every count reads one user's rows through a (tenant, user_id, ...) btree: memories by
ix_memories_user, sessions by their primary key, turns by ix_turns_user_session. No
query reaches another tenant's rows, and none reads a whole tenant.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from pydantic import TypeAdapter
from sqlalchemy import ColumnElement, exists, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memwell.core.cursor import decode_cursor, encode_cursor
from memwell.core.errors import InvalidCursor, NotFound
from memwell.db.models import MEMORY_KINDS, ChatSession, Memory, Turn
from memwell.intake.turns import Identifier
from memwell.users.records import UserDetail, UserItem, UserPage

MAX_PAGE: Final = 500
IDENTIFIER: Final = TypeAdapter(Identifier)

# The next user ids after :after, in id order. A user owns rows in any of three tables,
# so each table gives its own chain and the union is cut to :n. Postgres has no skip
# scan (DISTINCT user_id would read every row of the tenant): each step of a chain is
# one probe of the table's (tenant, user_id, ...) btree for the next larger id, so a
# page of n users costs about 3n probes however large the tenant is.
_CHAIN = """
  {name}(user_id, n) AS (
    SELECT (SELECT min(user_id) FROM {table} WHERE tenant = :tenant AND user_id > :after), 1
    UNION ALL
    SELECT (SELECT min(x.user_id) FROM {table} x
            WHERE x.tenant = :tenant AND x.user_id > {name}.user_id), {name}.n + 1
    FROM {name} WHERE {name}.user_id IS NOT NULL AND {name}.n < :n
  )"""
_TABLES = {"by_session": "sessions", "by_memory": "memories", "by_turn": "turns"}
NEXT_USER_IDS: Final = text(
    "WITH RECURSIVE"
    + ",".join(_CHAIN.format(name=name, table=table) for name, table in _TABLES.items())
    + "\nSELECT user_id FROM ("
    + " UNION ".join(f"SELECT user_id FROM {name}" for name in _TABLES)
    + ") AS u WHERE user_id IS NOT NULL ORDER BY user_id LIMIT :n"
)


def _live(tenant: str) -> list[ColumnElement[bool]]:
    """Memories retrieval would return now (sql.py's visibility, without the model)."""
    return [
        Memory.tenant == tenant,
        Memory.deleted_at.is_(None),
        Memory.superseded_by.is_(None),
        (Memory.expires_at.is_(None)) | (Memory.expires_at > func.now()),
    ]


def _after(key: list[Any]) -> str:
    # The rule of an id in a request: a NUL would reach Postgres and fail there.
    try:
        (after,) = key
        return str(IDENTIFIER.validate_python(after))
    except (TypeError, ValueError) as exc:  # pydantic's errors are ValueErrors
        raise InvalidCursor("malformed cursor") from exc


async def _session_stats(
    session: AsyncSession, tenant: str, user_ids: list[str]
) -> dict[str, tuple[int, datetime | None]]:
    rows = await session.execute(
        select(ChatSession.user_id, func.count(), func.max(ChatSession.last_activity_at))
        .where(ChatSession.tenant == tenant, ChatSession.user_id.in_(user_ids))
        .group_by(ChatSession.user_id)
    )
    return {user: (count, last) for user, count, last in rows.all()}


async def list_users(
    session: AsyncSession, *, tenant: str, limit: int = 50, cursor: str | None
) -> UserPage:
    """One page of the tenant's users in id order, with their counts."""
    scope = {"list": "users", "tenant": tenant}
    after = _after(decode_cursor(cursor, scope)) if cursor is not None else ""
    size = max(1, min(limit, MAX_PAGE))
    found = await session.scalars(NEXT_USER_IDS, {"tenant": tenant, "after": after, "n": size + 1})
    user_ids = list(found.all())
    page, more = user_ids[:size], len(user_ids) > size
    if not page:
        return UserPage(users=[], next_cursor=None)
    memories = await session.execute(
        select(Memory.user_id, func.count())
        .where(*_live(tenant), Memory.user_id.in_(page))
        .group_by(Memory.user_id)
    )
    memory_counts = {user: count for user, count in memories.all()}
    sessions = await _session_stats(session, tenant, page)
    users = [
        UserItem(
            user_id=user,
            memory_count=memory_counts.get(user, 0),
            session_count=sessions.get(user, (0, None))[0],
            last_activity_at=sessions.get(user, (0, None))[1],
        )
        for user in page
    ]
    return UserPage(users=users, next_cursor=encode_cursor(scope, [page[-1]]) if more else None)


async def get_user(session: AsyncSession, *, tenant: str, user_id: str) -> UserDetail:
    """The user's live memories by kind, sessions, pending turns and last activity."""
    by_kind = dict.fromkeys(MEMORY_KINDS, 0)
    kinds = await session.execute(
        select(Memory.kind, func.count())
        .where(*_live(tenant), Memory.user_id == user_id)
        .group_by(Memory.kind)
    )
    by_kind.update({kind: count for kind, count in kinds.all()})
    sessions, last_activity = (await _session_stats(session, tenant, [user_id])).get(
        user_id, (0, None)
    )
    turns, pending, consolidated = (
        await session.execute(
            select(
                func.count(),
                func.count().filter(Turn.status == "pending"),
                func.max(Turn.processed_at),
            ).where(Turn.tenant == tenant, Turn.user_id == user_id)
        )
    ).one()
    if not sessions and not turns and not any(by_kind.values()):
        # Only tombstoned or superseded memories left: the user still has history.
        owned = select(Memory.id).where(Memory.tenant == tenant, Memory.user_id == user_id)
        if not await session.scalar(select(exists(owned))):
            raise NotFound(f"user {user_id!r} not found")
    return UserDetail(
        user_id=user_id,
        memory_count=sum(by_kind.values()),
        memories_by_kind=by_kind,
        session_count=sessions,
        pending_turns=pending,
        last_consolidated_at=consolidated,
        last_activity_at=last_activity,
    )
