"""A memory whose text was edited states what its new text says, and no longer what
the old one said.

Its links are replaced (the links' trigger takes the old ones off their entities'
mention counts). Its current relations are withdrawn: a single-valued one that had
replaced an earlier value gives the slot back to that value, as if the retracted
statement had never been made; then the new text's relations are written as any
memory's are, at the memory's own time, so a value it restates supersedes again. Its
past relations (values a later memory replaced) stay as history.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

from memwell.entities.store import EntitySource, EntityWriteReport, write_entities

_WITHDRAWN = text(
    "SELECT id FROM entity_relations WHERE memory_id = :memory AND superseded_by IS NULL"
)
_PREDECESSORS = text("SELECT id FROM entity_relations WHERE superseded_by = ANY(:ids)")
# Deleting the withdrawn edges clears their predecessors' superseded_by (the foreign
# key's ON DELETE SET NULL); ending no more, a predecessor is the slot's value again.
_DELETE = text("DELETE FROM entity_relations WHERE id = ANY(:ids)")
_REOPEN = text("UPDATE entity_relations SET valid_to = NULL WHERE id = ANY(:ids)")
_UNLINK = text("DELETE FROM memory_entities WHERE memory_id = :memory")


def restate_entities(session: Session, source: EntitySource) -> EntityWriteReport:
    """Replace what `source.memory_id` mentions and states by `source.extraction`."""
    withdrawn = list(session.scalars(_WITHDRAWN, {"memory": source.memory_id}))
    if withdrawn:
        predecessors = list(session.scalars(_PREDECESSORS, {"ids": withdrawn}))
        session.execute(_DELETE, {"ids": withdrawn})
        if predecessors:
            session.execute(_REOPEN, {"ids": predecessors})
    session.execute(_UNLINK, {"memory": source.memory_id})
    return write_entities(session, [source])
