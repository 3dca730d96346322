"""Relation edges with provenance and validity, written a batch at a time.

A multi-valued relation (Caroline -sibling-> Ana, Melanie -likes-> pottery) is added
once: stating it again adds no row. A single-valued one (a slot: lives_in, works_at,
job, ...) has at most one current edge per (subject, relation), which a partial
unique index enforces. A new value ends the current edge: its `valid_to` becomes the
new edge's `valid_from` (the stating memory's event time) and its `superseded_by`
the new edge, as a superseded memory points at its successor. The same value again
reinforces the current edge: its provenance gains the memory's turns, and no row is
added. Edges outlive their memory (`memory_id` is only cleared on delete): they are
history.

Facts are applied in the batch's order, so "moved to Berlin" then "moved to Lisbon"
in one batch leaves Berlin ended by Lisbon. A value stated with an event time before
the current edge's (history imported late) is stored as history, already ended by
the current edge, which stays. The whole batch is one statement: the
current edges are read first, then the retirements, reinforcements and inserts go
together (`_WRITE`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from sqlalchemy import text
from sqlalchemy.orm import Session

_SEP: Final = "\x1f"  # joins one edge's turn ids into one array element

_CURRENT = text(
    """
    SELECT r.id, r.subject_id, r.relation, r.object_id, r.value, r.valid_from
    FROM unnest(CAST(:subjects AS uuid[]), CAST(:relations AS text[])) AS c(subject_id, relation)
    JOIN entity_relations r ON r.subject_id = c.subject_id AND r.relation = c.relation
    WHERE r.superseded_by IS NULL AND r.valid_to IS NULL
    """
)

# The retirements run first (an InitPlan over `retired` is evaluated before the first
# row is inserted), so a new current edge never meets the old one in the unique index;
# the foreign key from the old edge to the new one is checked at the statement's end,
# when both rows exist.
_WRITE = text(
    """
    WITH retired AS (
        UPDATE entity_relations r SET valid_to = c.valid_to, superseded_by = c.successor
        FROM unnest(CAST(:old_ids AS uuid[]), CAST(:old_ends AS timestamptz[]),
                    CAST(:old_successors AS uuid[])) AS c(id, valid_to, successor)
        WHERE r.id = c.id
        RETURNING r.id
    ),
    reinforced AS (
        UPDATE entity_relations r SET source_turn_ids = ARRAY(
            SELECT DISTINCT unnest(r.source_turn_ids || string_to_array(c.sources, :sep)))
        FROM unnest(CAST(:same_ids AS uuid[]), CAST(:same_sources AS text[])) AS c(id, sources)
        WHERE r.id = c.id
        RETURNING r.id
    )
    INSERT INTO entity_relations (id, tenant, user_id, subject_id, relation, object_id, value,
        single_valued, memory_id, source_turn_ids, valid_from, valid_to, superseded_by)
    SELECT n.id, n.tenant, n.user_id, n.subject_id, n.relation, n.object_id, n.value,
        n.single_valued, n.memory_id, string_to_array(n.sources, :sep), n.valid_from,
        n.valid_to, n.superseded_by
    FROM unnest(CAST(:ids AS uuid[]), CAST(:tenants AS text[]), CAST(:users AS text[]),
                CAST(:subjects AS uuid[]), CAST(:relations AS text[]),
                CAST(:objects AS uuid[]), CAST(:values AS text[]), CAST(:singles AS bool[]),
                CAST(:memories AS uuid[]), CAST(:sources AS text[]),
                CAST(:froms AS timestamptz[]), CAST(:tos AS timestamptz[]),
                CAST(:successors AS uuid[]))
        AS n(id, tenant, user_id, subject_id, relation, object_id, value, single_valued,
             memory_id, sources, valid_from, valid_to, superseded_by)
    WHERE (SELECT count(*) FROM retired) >= 0 AND (SELECT count(*) FROM reinforced) >= 0
    """
)


@dataclass
class RelationRow:
    """One edge a memory states, its ends resolved to entity ids."""

    tenant: str
    user_id: str
    subject_id: uuid.UUID
    relation: str
    object_id: uuid.UUID | None
    value: str | None
    single_valued: bool
    memory_id: uuid.UUID | None
    source_turn_ids: list[str]
    valid_from: datetime | None
    id: uuid.UUID = field(default_factory=uuid.uuid4)
    valid_to: datetime | None = None
    superseded_by: uuid.UUID | None = None

    def same_target(self, object_id: uuid.UUID | None, value: str | None) -> bool:
        if self.object_id is not None or object_id is not None:
            return self.object_id == object_id
        return (self.value or "").strip().lower() == (value or "").strip().lower()


@dataclass(frozen=True)
class _Current:
    id: uuid.UUID
    object_id: uuid.UUID | None
    value: str | None
    valid_from: datetime | None


def _older(row: RelationRow, than: datetime | None) -> bool:
    return row.valid_from is not None and than is not None and row.valid_from < than


def write_relations(session: Session, rows: list[RelationRow]) -> tuple[int, int]:
    """Apply the batch's edges in order; returns (edges added, edges superseded)."""
    if not rows:
        return 0, 0
    pairs = sorted({(r.subject_id, r.relation) for r in rows}, key=str)
    current: dict[tuple[uuid.UUID, str], list[_Current]] = {}
    for c in session.execute(
        _CURRENT, {"subjects": [s for s, _ in pairs], "relations": [rel for _, rel in pairs]}
    ):
        current.setdefault((c.subject_id, c.relation), []).append(
            _Current(c.id, c.object_id, c.value, c.valid_from)
        )
    new: list[RelationRow] = []
    batch_current: dict[tuple[uuid.UUID, str], RelationRow] = {}
    retired: list[tuple[uuid.UUID, datetime | None, uuid.UUID]] = []
    same: dict[uuid.UUID, set[str]] = {}
    for row in rows:
        slot = (row.subject_id, row.relation)
        mine = batch_current.get(slot) if row.single_valued else None
        stored = current.get(slot, [])
        if not row.single_valued:
            dupe = any(row.same_target(c.object_id, c.value) for c in stored) or any(
                n.subject_id == row.subject_id
                and n.relation == row.relation
                and n.same_target(row.object_id, row.value)
                for n in new
            )
            if not dupe:
                new.append(row)
            continue
        if mine is not None:
            if mine.same_target(row.object_id, row.value):
                mine.source_turn_ids = sorted({*mine.source_turn_ids, *row.source_turn_ids})
                continue
            if _older(row, mine.valid_from):
                row.valid_to, row.superseded_by = mine.valid_from, mine.id
                new.append(row)
                continue
            mine.valid_to, mine.superseded_by = row.valid_from, row.id
        elif stored:
            old = stored[0]
            if row.same_target(old.object_id, old.value):
                same.setdefault(old.id, set()).update(row.source_turn_ids)
                continue
            if _older(row, old.valid_from):
                # Told late about an earlier value (an import of old history): it is
                # history already, ended by the value that followed it.
                row.valid_to, row.superseded_by = old.valid_from, old.id
                new.append(row)
                continue
            retired.append((old.id, row.valid_from, row.id))
        batch_current[slot] = row
        new.append(row)
    _execute(session, new, retired, same)
    return len(new), len(retired) + sum(1 for n in new if n.superseded_by is not None)


def _execute(
    session: Session,
    new: list[RelationRow],
    retired: list[tuple[uuid.UUID, datetime | None, uuid.UUID]],
    same: dict[uuid.UUID, set[str]],
) -> None:
    if not (new or retired or same):
        return
    session.execute(
        _WRITE,
        {
            "sep": _SEP,
            "old_ids": [o for o, _, _ in retired],
            "old_ends": [e for _, e, _ in retired],
            "old_successors": [s for _, _, s in retired],
            "same_ids": list(same),
            "same_sources": [_SEP.join(sorted(s)) for s in same.values()],
            "ids": [n.id for n in new],
            "tenants": [n.tenant for n in new],
            "users": [n.user_id for n in new],
            "subjects": [n.subject_id for n in new],
            "relations": [n.relation for n in new],
            "objects": [n.object_id for n in new],
            "values": [n.value for n in new],
            "singles": [n.single_valued for n in new],
            "memories": [n.memory_id for n in new],
            "sources": [_SEP.join(n.source_turn_ids) for n in new],
            "froms": [n.valid_from for n in new],
            "tos": [n.valid_to for n in new],
            "successors": [n.superseded_by for n in new],
        },
    )
