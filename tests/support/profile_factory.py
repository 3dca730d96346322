"""Entity rows as consolidation leaves them, inserted straight into Postgres: a user's
entities, the memories that mention them, and relation edges with provenance, one
slot value superseded by a newer one.

`seed_profile` builds one small world (Caroline, who moved from Berlin to Boston, her
sister Ana who works at Acme) and returns the ids a test asserts on.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from memwell.db.models import Entity, EntityRelation, MemoryEntity
from tests.support.memory_factory import add_memory, unit

T0 = datetime(2026, 1, 10, 9, 0, tzinfo=UTC)


def add_entity(
    session: Session,
    *,
    tenant: str,
    user_id: str,
    name: str,
    kind: str = "other",
    mention_count: int = 1,
    last_seen_at: datetime = T0,
) -> uuid.UUID:
    entity_id: uuid.UUID = session.execute(
        insert(Entity)
        .values(
            tenant=tenant, user_id=user_id, key=name.lower(), name=name, kind=kind,
            mention_count=mention_count, last_seen_at=last_seen_at,
        )
        .returning(Entity.id)
    ).scalar_one()  # fmt: skip
    return entity_id


def add_relation(
    session: Session,
    *,
    tenant: str,
    user_id: str,
    subject_id: uuid.UUID,
    relation: str,
    object_id: uuid.UUID | None = None,
    value: str | None = None,
    memory_id: uuid.UUID | None = None,
    **columns: Any,
) -> uuid.UUID:
    """One edge; its memory links to both of its entities, as the pipeline links them."""
    relation_id: uuid.UUID = session.execute(
        insert(EntityRelation)
        .values(
            tenant=tenant, user_id=user_id, subject_id=subject_id, relation=relation,
            object_id=object_id, value=value, memory_id=memory_id, **columns,
        )
        .returning(EntityRelation.id)
    ).scalar_one()  # fmt: skip
    if memory_id is not None:
        links = [e for e in (subject_id, object_id) if e is not None]
        session.execute(
            insert(MemoryEntity),
            [{"memory_id": memory_id, "entity_id": e, "tenant": tenant, "user_id": user_id}
             for e in links],
        )  # fmt: skip
    return relation_id


@dataclass(frozen=True)
class SeededProfile:
    caroline: uuid.UUID
    ana: uuid.UUID
    boston: uuid.UUID
    acme: uuid.UUID
    lives_in: uuid.UUID
    lives_in_before: uuid.UUID
    sister: uuid.UUID
    age: uuid.UUID
    works_at: uuid.UUID
    boston_memory: uuid.UUID


def seed_profile(session: Session, *, tenant: str, user_id: str) -> SeededProfile:
    """Caroline (most mentioned) lives in Boston now (Berlin before), is 34 and has a
    sister, Ana, who works at Acme; a fact from a forgotten memory is left behind."""
    who = {"tenant": tenant, "user_id": user_id}

    def memory(content: str, **columns: Any) -> uuid.UUID:
        turns = [f"turn-{content.split()[-1].strip('.').lower()}"]
        return add_memory(
            session, **who, content=content, embedding=unit(0.5), source_turn_ids=turns,
            **columns,
        )  # fmt: skip

    caroline = add_entity(session, **who, name="Caroline", kind="person", mention_count=5)
    ana = add_entity(session, **who, name="Ana", kind="person", mention_count=3)
    boston = add_entity(session, **who, name="Boston", kind="place", mention_count=2)
    berlin = add_entity(session, **who, name="Berlin", kind="place", mention_count=1)
    acme = add_entity(
        session, **who, name="Acme", kind="organization", last_seen_at=T0 - timedelta(days=1)
    )
    to_boston = memory("Caroline moved to Boston.")
    in_berlin = memory("Caroline lives in Berlin.", superseded_by=to_boston)
    moved = T0 + timedelta(days=3)
    lives_in = add_relation(
        session, **who, subject_id=caroline, relation="lives_in", object_id=boston,
        single_valued=True, memory_id=to_boston, source_turn_ids=["turn-boston"],
        valid_from=moved,
    )  # fmt: skip
    before = add_relation(
        session, **who, subject_id=caroline, relation="lives_in", object_id=berlin,
        single_valued=True, memory_id=in_berlin, source_turn_ids=["turn-berlin"],
        valid_from=T0, valid_to=moved, superseded_by=lives_in,
    )  # fmt: skip
    sister = add_relation(
        session, **who, subject_id=caroline, relation="sister", object_id=ana,
        memory_id=memory("Caroline's sister is Ana."), valid_from=T0 + timedelta(days=1),
    )  # fmt: skip
    age = add_relation(
        session, **who, subject_id=caroline, relation="age", value="34", single_valued=True,
        memory_id=memory("Caroline is 34 years old."), valid_from=T0,
    )  # fmt: skip
    works_at = add_relation(
        session, **who, subject_id=ana, relation="works_at", object_id=acme, single_valued=True,
        memory_id=memory("Ana works at Acme."), valid_from=T0,
    )  # fmt: skip
    add_relation(
        session, **who, subject_id=caroline, relation="drives", value="a red Mini",
        single_valued=True, memory_id=memory("Caroline drives a red Mini.", deleted_at=T0),
    )  # fmt: skip
    return SeededProfile(
        caroline=caroline, ana=ana, boston=boston, acme=acme, lives_in=lives_in,
        lives_in_before=before, sister=sister, age=age, works_at=works_at,
        boston_memory=to_boston,
    )  # fmt: skip
