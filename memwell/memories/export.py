"""A user's memories as a portable file: the format, and reading it out of the store.

The file is JSON Lines: a header object, then one object per memory with every field a
client may read (`MemoryRecord`), its `state` and its full history, then one object
per entity of the user's entity memory (`ExportedEntity`, marked `"record":
"entity"`): its key, name, kind, counts, aliases and the relations it is the subject
of, history included (an edge with `valid_to` set was superseded). The header counts
both. An import re-adds the live memories and rebuilds their entities from them, so
entity lines are read for completeness but not restored. Rows are read in
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

from memwell.db.models import Entity, EntityAlias, EntityRelation, Memory, MemoryEvent
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
    #: the entity lines after the memories (files of older versions have none)
    entities: int = Field(default=0, ge=0)


class ExportedMemory(MemoryRecord):
    """One memory line: the record, whether it is still live, and how it got here."""

    #: live; superseded by a newer memory; or tombstoned (its text already redacted)
    state: State
    history: list[HistoryEvent]


class ExportedRelation(BaseModel):
    """An edge from the entity: to another entity (its key) or to a value."""

    relation: str
    object: str | None
    value: str | None
    single_valued: bool
    valid_from: datetime | None
    #: set when a newer value superseded it
    valid_to: datetime | None
    memory_id: uuid.UUID | None
    source_turn_ids: list[str]


class ExportedEntity(BaseModel):
    """One entity line."""

    record: Literal["entity"] = "entity"
    key: str
    name: str
    kind: str
    mention_count: int
    created_at: datetime
    last_seen_at: datetime
    aliases: list[str]
    relations: list[ExportedRelation]


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
    entities = session.scalar(
        select(func.count())
        .select_from(Entity)
        .where(Entity.tenant == tenant, Entity.user_id == user_id)
    )
    return ExportHeader(
        tenant=tenant,
        user_id=user_id,
        exported_at=datetime.now(UTC),
        count=int(count or 0),
        entities=int(entities or 0),
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


def export_entities(
    session: Session, *, tenant: str, user_id: str, batch_size: int = EXPORT_BATCH
) -> Iterator[list[ExportedEntity]]:
    """The user's entities in key order, `batch_size` at a time, each with its aliases
    and the relations it is the subject of (three queries per batch)."""
    after: str | None = None
    while True:
        page = (
            select(Entity)
            .where(Entity.tenant == tenant, Entity.user_id == user_id)
            .order_by(Entity.key)
            .limit(batch_size)
        )
        if after is not None:
            page = page.where(Entity.key > after)
        rows = list(session.scalars(page))
        if not rows:
            return
        ids = [e.id for e in rows]
        aliases: dict[uuid.UUID, list[str]] = defaultdict(list)
        for entity_id, alias in session.execute(
            select(EntityAlias.entity_id, EntityAlias.alias)
            .where(EntityAlias.tenant == tenant, EntityAlias.entity_id.in_(ids))
            .order_by(EntityAlias.alias)
        ):
            aliases[entity_id].append(alias)
        relations: dict[uuid.UUID, list[ExportedRelation]] = defaultdict(list)
        edges = session.execute(
            select(EntityRelation, Entity.key)
            .outerjoin(Entity, Entity.id == EntityRelation.object_id)
            .where(EntityRelation.tenant == tenant, EntityRelation.subject_id.in_(ids))
            .order_by(
                EntityRelation.subject_id,
                EntityRelation.valid_from.nulls_first(),  # history in the order it held
                EntityRelation.created_at,
                EntityRelation.id,
            )
        )
        for edge, object_key in edges:
            relations[edge.subject_id].append(
                ExportedRelation(
                    relation=edge.relation,
                    object=object_key,
                    value=edge.value,
                    single_valued=edge.single_valued,
                    valid_from=edge.valid_from,
                    valid_to=edge.valid_to,
                    memory_id=edge.memory_id,
                    source_turn_ids=list(edge.source_turn_ids),
                )
            )
        yield [
            ExportedEntity(
                key=e.key,
                name=e.name,
                kind=e.kind,
                mention_count=e.mention_count,
                created_at=e.created_at,
                last_seen_at=e.last_seen_at,
                aliases=aliases[e.id],
                relations=relations[e.id],
            )
            for e in rows
        ]
        after = rows[-1].key
        session.expunge_all()
