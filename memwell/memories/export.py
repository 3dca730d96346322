"""A user's memories as a portable file: the format, and reading it out of the store.

The file is JSON Lines: a header object, then one object per memory with every field a
client may read (`MemoryRecord`), its `state` and its full history. Rows are read in
bounded batches by keyset on (created_at, id), on the (tenant, user_id, created_at)
index, so an export of any size holds one batch in memory. Run the count and the
batches in one REPEATABLE READ transaction and the header's count matches the lines.

`memwell/memories/restore.py` reads the file back.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import ColumnElement, func, select, tuple_
from sqlalchemy.orm import Session, defer

from memwell.db.models import Memory, MemoryEvent
from memwell.memories.record import HistoryEvent, MemoryRecord

EXPORT_FORMAT: Final = "memwell-export"
EXPORT_VERSION: Final = 1
EXPORT_BATCH: Final = 500

State = Literal["live", "superseded", "deleted"]


class ExportHeader(BaseModel):
    """The file's first line: what it holds and whose it is."""

    model_config = ConfigDict(frozen=True)

    format: Literal["memwell-export"] = EXPORT_FORMAT
    version: int = EXPORT_VERSION
    tenant: str
    user_id: str
    exported_at: datetime
    #: the memory lines that follow
    count: int = Field(ge=0)


class ExportedMemory(MemoryRecord):
    """One memory line: the record, whether it is still live, and how it got here."""

    #: live; superseded by a newer memory; or tombstoned (its text already redacted)
    state: State
    history: list[HistoryEvent]


def _state(m: Memory) -> State:
    if m.deleted_at is not None:
        return "deleted"
    return "superseded" if m.superseded_by is not None else "live"


def _where(tenant: str, user_id: str, include_superseded: bool) -> list[ColumnElement[bool]]:
    conditions = [Memory.tenant == tenant, Memory.user_id == user_id]
    if not include_superseded:
        conditions += [Memory.deleted_at.is_(None), Memory.superseded_by.is_(None)]
    return conditions


def export_header(
    session: Session, *, tenant: str, user_id: str, include_superseded: bool = False
) -> ExportHeader:
    """The header of the user's export, with the count of memories it will hold."""
    count = session.scalar(
        select(func.count()).select_from(Memory).where(*_where(tenant, user_id, include_superseded))
    )
    return ExportHeader(
        tenant=tenant, user_id=user_id, exported_at=datetime.now(UTC), count=int(count or 0)
    )


def _histories(
    session: Session, tenant: str, memory_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[HistoryEvent]]:
    events: dict[uuid.UUID, list[HistoryEvent]] = defaultdict(list)
    rows = session.scalars(
        select(MemoryEvent)
        .where(MemoryEvent.tenant == tenant, MemoryEvent.memory_id.in_(memory_ids))
        .order_by(MemoryEvent.memory_id, MemoryEvent.id)
    )
    for e in rows:
        events[e.memory_id].append(HistoryEvent.of(e))
    return events


def export_batches(
    session: Session,
    *,
    tenant: str,
    user_id: str,
    include_superseded: bool = False,
    batch_size: int = EXPORT_BATCH,
) -> Iterator[list[ExportedMemory]]:
    """The user's memories, oldest first, `batch_size` at a time, each with its history
    (one query for the rows and one for their events per batch)."""
    conditions = _where(tenant, user_id, include_superseded)
    after: tuple[datetime, uuid.UUID] | None = None
    while True:
        page = (
            select(Memory)
            .options(defer(Memory.embedding), defer(Memory.fts))
            .where(*conditions)
            .order_by(Memory.created_at, Memory.id)
            .limit(batch_size)
        )
        if after is not None:
            page = page.where(tuple_(Memory.created_at, Memory.id) > tuple_(*after))
        rows = list(session.scalars(page))
        if not rows:
            return
        histories = _histories(session, tenant, [m.id for m in rows])
        yield [
            ExportedMemory(
                **MemoryRecord.of(m).model_dump(), state=_state(m), history=histories[m.id]
            )
            for m in rows
        ]
        after = (rows[-1].created_at, rows[-1].id)
        # The rows were only read: let the session forget them, so memory stays flat.
        session.expunge_all()
