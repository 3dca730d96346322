"""What a bulk import has stored so far: turns by status, turns already stored, and
the memories of its users. Bounded `IN` lists, so any number of ids works. And the
planner statistics of the tables a search reads, refreshed once an import has added to
them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from memwell.db.models import Memory, Turn

_ID_CHUNK = 5000  # ids per IN-list: bounded statements however large the file
#: What the search statement reads (memwell/retrieval/sql.py, entity_sql.py).
SEARCHED_TABLES: Final = (
    "memories", "memory_entities", "entities", "entity_aliases", "entity_relations"
)  # fmt: skip


def _chunks(ids: Sequence[str]) -> list[Sequence[str]]:
    return [ids[i : i + _ID_CHUNK] for i in range(0, len(ids), _ID_CHUNK)]


def status_counts(session: Session, *, tenant: str, turn_ids: Sequence[str]) -> dict[str, int]:
    """How many of these turns are in each status (absent ones are not counted)."""
    counts: dict[str, int] = {}
    for chunk in _chunks(turn_ids):
        rows = session.execute(
            select(Turn.status, func.count())
            .where(Turn.tenant == tenant, Turn.id.in_(chunk))
            .group_by(Turn.status)
        ).all()
        for status, n in rows:
            counts[status] = counts.get(status, 0) + int(n)
    return counts


def stored_ids(session: Session, *, tenant: str, turn_ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for chunk in _chunks(turn_ids):
        found.update(
            session.scalars(select(Turn.id).where(Turn.tenant == tenant, Turn.id.in_(chunk)))
        )
    return found


def count_memories(session: Session, *, tenant: str, users: Sequence[str]) -> int:
    return int(
        session.scalar(
            select(func.count())
            .select_from(Memory)
            .where(Memory.tenant == tenant, Memory.user_id.in_(users), Memory.deleted_at.is_(None))
        )
        or 0
    )


def analyze_searched_tables(session: Session) -> None:
    """ANALYZE the tables a search reads. Until autovacuum's next round (its naptime is
    a minute) the planner plans a store an import has just filled by the statistics of
    the empty one, and picks plans that are several times slower for it. A role that
    may not analyze a table gets a warning from Postgres, not an error, and the import
    is unaffected."""
    session.execute(text(f"ANALYZE {', '.join(SEARCHED_TABLES)}"))
    session.commit()
