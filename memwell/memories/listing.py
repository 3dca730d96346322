"""A user's memories as a list: filtered, sorted, keyset-paged, with a total.

The page is read by the (tenant, user_id, ...) btree, so one user's list never
touches another user's rows; the total counts the same filtered rows, which for one
user stays cheap. Tombstoned and superseded memories are left out unless asked for.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel
from sqlalchemy import ColumnElement, Select, func, literal_column, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from memwell.core.cursor import decode_cursor, encode_cursor
from memwell.core.errors import InvalidCursor
from memwell.db.models import Memory
from memwell.memories.record import MemoryRecord

Sort = Literal["newest", "importance", "strength"]
MAX_PAGE = 500


@dataclass(frozen=True)
class MemoryFilters:
    """Every field left unset is no filter."""

    kinds: tuple[str, ...] | None = None
    session_id: str | None = None
    agent_id: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    pinned: bool | None = None
    include_deleted: bool = False
    include_superseded: bool = False
    #: full-text match on the content (web search syntax), by the memories' GIN index
    text: str | None = None
    #: JSONB containment, as search's metadata filter: rows whose metadata contains this
    metadata: dict[str, Any] | None = None


class MemoryPage(BaseModel):
    memories: list[MemoryRecord]
    #: pass back as `cursor` for the next page; None on the last page
    next_cursor: str | None
    #: how many memories match the filters, across all pages
    total: int


def _sort_columns(sort: Sort) -> tuple[Any, Any]:
    first = {"newest": Memory.created_at, "importance": Memory.importance}.get(
        sort, Memory.strength
    )
    return first, Memory.id


def _where(tenant: str, user_id: str, f: MemoryFilters) -> list[ColumnElement[bool]]:
    conditions = [Memory.tenant == tenant, Memory.user_id == user_id]
    if not f.include_deleted:
        conditions.append(Memory.deleted_at.is_(None))
    if not f.include_superseded:
        conditions.append(Memory.superseded_by.is_(None))
    if f.kinds:
        conditions.append(Memory.kind.in_(f.kinds))
    if f.session_id is not None:
        conditions.append(Memory.session_id == f.session_id)
    if f.agent_id is not None:
        conditions.append(Memory.agent_id == f.agent_id)
    if f.created_after is not None:
        conditions.append(Memory.created_at >= f.created_after)
    if f.created_before is not None:
        conditions.append(Memory.created_at < f.created_before)
    if f.pinned is not None:
        conditions.append(Memory.pinned.is_(f.pinned))
    if f.metadata:
        conditions.append(Memory.metadata_.contains(f.metadata))
    if f.text:
        # The same configuration as the generated `fts` column, so the index applies.
        query = func.websearch_to_tsquery(
            literal_column("'english'::regconfig"), func.public.memwell_search_text(f.text)
        )
        conditions.append(Memory.fts.bool_op("@@")(query))
    return conditions


def _after(sort: Sort, key: list[Any]) -> ColumnElement[bool]:
    first, second = _sort_columns(sort)
    if len(key) != 2:
        raise InvalidCursor("malformed cursor")
    value = datetime.fromisoformat(key[0]) if sort == "newest" else float(key[0])
    return tuple_(first, second) < tuple_(value, uuid.UUID(str(key[1])))


def _page_statement(conditions: list[ColumnElement[bool]], sort: Sort, limit: int) -> Select[Any]:
    first, second = _sort_columns(sort)
    return select(Memory).where(*conditions).order_by(first.desc(), second.desc()).limit(limit + 1)


async def list_memories(
    session: AsyncSession,
    *,
    tenant: str,
    user_id: str,
    filters: MemoryFilters | None = None,
    sort: Sort = "newest",
    limit: int = 50,
    cursor: str | None = None,
) -> MemoryPage:
    """One page of the user's memories, best first by `sort`, and the total."""
    f = filters or MemoryFilters()
    scope = {"tenant": tenant, "user": user_id, "sort": sort}
    conditions = _where(tenant, user_id, f)
    total = int(
        await session.scalar(select(func.count()).select_from(Memory).where(*conditions)) or 0
    )
    if cursor is not None:
        try:
            conditions.append(_after(sort, decode_cursor(cursor, scope)))
        except (TypeError, ValueError) as exc:
            raise InvalidCursor("malformed cursor") from exc
    size = max(1, min(limit, MAX_PAGE))
    rows = list((await session.scalars(_page_statement(conditions, sort, size))).all())
    more = len(rows) > size
    rows = rows[:size]
    next_cursor = None
    if more and rows:
        last = rows[-1]
        first, _ = _sort_columns(sort)
        value = getattr(last, first.key)
        key = [value.isoformat() if isinstance(value, datetime) else value, str(last.id)]
        next_cursor = encode_cursor(scope, key)
    return MemoryPage(
        memories=[MemoryRecord.of(m) for m in rows], next_cursor=next_cursor, total=total
    )
