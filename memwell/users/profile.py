"""A user's profile: what their entity memory holds now, read in one statement.

Two views of the entity tables (migration 0010):
- `facts`: every current value of a single-valued relation (a slot: name, lives_in,
  works_at, job, status, age, favorite_X, drives), grouped by the entity it is about;
- `entities`: the most mentioned entities, each with its current relations in both
  directions.

An edge is current when no later value replaced it (`superseded_by`), it has not
ended (`valid_to`), and the memory that stated it, if it still has one, is live: a
forgotten, superseded or expired memory takes the facts it stated out of the profile,
as it takes itself out of retrieval. Superseded values stay in the tables, as history.

Both views come from one statement, each part bounded by a LIMIT; a second statement
runs only when the profile is empty, to tell a user without entities (an empty
profile) from no user at all (NotFound), by the rule GET /v1/users/{id} applies.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from itertools import groupby
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict
from sqlalchemy import exists, or_, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memwell.core.errors import NotFound
from memwell.db.models import ChatSession, Entity, Memory, Turn

DEFAULT_ENTITIES: Final = 10
MAX_ENTITIES: Final = 100
DEFAULT_RELATIONS: Final = 20
MAX_RELATIONS: Final = 100
#: Slots are few per entity (one value each); this bounds a user with very many entities.
MAX_FACTS: Final = 500

_PROVENANCE: JsonDict = {
    "memory_id": "7d4f0c1e-2b9a-4c55-9d43-0a8e4b6f1c21",
    "source_turn_ids": ["m-17"],
    "valid_from": "2026-02-11T18:03:00Z",
}
_EXAMPLE: JsonDict = {
    "user_id": "u1",
    "facts": [
        {
            "entity_id": "0b5e2f4a-8c1d-4e7f-9a3b-6d2c1e0f9a87",
            "name": "Caroline",
            "kind": "person",
            "slots": {
                "lives_in": {
                    "relation_id": "5a1c9e3d-7b2f-4d6a-8e0c-1f3b5d7a9c2e",
                    "value": "Boston",
                    "value_entity_id": "c3d9a1b7-5e2f-4a8c-9d6e-0b4f2a7c1e93",
                    **_PROVENANCE,
                }
            },
        }
    ],
    "entities": [
        {
            "entity_id": "0b5e2f4a-8c1d-4e7f-9a3b-6d2c1e0f9a87",
            "name": "Caroline",
            "kind": "person",
            "mention_count": 12,
            "last_seen_at": "2026-03-01T09:40:12Z",
            "relations": [
                {
                    "relation_id": "9e2b7c4a-1d5f-4a3e-8b6c-2f0d9a1e7b35",
                    "relation": "sister",
                    "direction": "out",
                    "value": "Ana",
                    "value_entity_id": "4f7a2c9e-3b1d-4e8a-a5c6-7d0e2b9f1a64",
                    "single_valued": False,
                    **_PROVENANCE,
                }
            ],
        }
    ],
}


class _Provenance(BaseModel):
    model_config = ConfigDict(frozen=True)

    relation_id: uuid.UUID
    value: str = Field(description="The other entity's name, or the literal value.")
    value_entity_id: uuid.UUID | None = Field(description="The other entity, when it is one.")
    memory_id: uuid.UUID | None = Field(description="The memory that stated it.")
    source_turn_ids: list[str] = Field(description="The turns that memory came from.")
    valid_from: datetime | None = Field(description="Since when it holds, as stated.")


class SlotValue(_Provenance):
    """The current value of one single-valued relation, and where it came from."""


class SubjectFacts(BaseModel):
    """One entity's current slots, keyed by relation (lives_in, works_at, ...)."""

    model_config = ConfigDict(frozen=True)

    entity_id: uuid.UUID
    name: str
    kind: str
    slots: dict[str, SlotValue]


class ProfileRelation(_Provenance):
    """A current edge of an entity: `out` when the entity is its subject ("Caroline
    sister Ana" seen from Caroline), `in` when it is the object (seen from Ana)."""

    relation: str
    direction: Literal["out", "in"]
    single_valued: bool


class ProfileEntity(BaseModel):
    model_config = ConfigDict(frozen=True)

    entity_id: uuid.UUID
    name: str
    kind: str
    mention_count: int = Field(description="How many of the user's memories mention it.")
    last_seen_at: datetime
    relations: list[ProfileRelation]


class UserProfile(BaseModel):
    """What the user's entity memory holds now; superseded values are left out."""

    model_config = ConfigDict(frozen=True, json_schema_extra={"examples": [_EXAMPLE]})

    user_id: str
    facts: list[SubjectFacts] = Field(
        description="Current single-valued facts, by entity, most mentioned entity first."
    )
    entities: list[ProfileEntity] = Field(
        description="The most mentioned entities (then the most recently seen), each with "
        "its current relations, newest first."
    )


# Appended to each part's WHERE (alias r): the edge's value is the current one.
_CURRENT = """r.superseded_by IS NULL
    AND (r.valid_to IS NULL OR r.valid_to > now())
    AND NOT EXISTS (
      SELECT 1 FROM memories m WHERE m.id = r.memory_id
        AND (m.deleted_at IS NOT NULL OR m.superseded_by IS NOT NULL OR m.expires_at <= now()))"""

# Facts scan the user's edges through ix_entity_relations_subject; each top entity
# probes its own edges, out through that index and in through ix_entity_relations_object.
# Rows come back ordered: facts by entity rank, then entities by rank, each entity's
# edges newest first (`edge` 0 is an entity without a current edge).
PROFILE_SQL: Final = text(f"""
WITH facts AS (
  SELECT s.id AS entity_id, s.name, s.kind, s.mention_count, s.last_seen_at,
         row_number() OVER (ORDER BY s.mention_count DESC, s.last_seen_at DESC, s.id,
                                     r.relation) AS rank,
         r.id AS relation_id, r.relation, 'out'::text AS direction, r.object_id,
         coalesce(o.name, r.value) AS value, r.single_valued, r.memory_id,
         r.source_turn_ids, r.valid_from
  FROM entity_relations r
  JOIN entities s ON s.id = r.subject_id
  LEFT JOIN entities o ON o.id = r.object_id
  WHERE r.tenant = :tenant AND r.user_id = :user_id AND r.single_valued AND {_CURRENT}
  ORDER BY rank
  LIMIT :facts_limit
),
top AS (
  SELECT id, name, kind, mention_count, last_seen_at,
         row_number() OVER (ORDER BY mention_count DESC, last_seen_at DESC, id) AS rank
  FROM entities
  WHERE tenant = :tenant AND user_id = :user_id
  ORDER BY rank
  LIMIT :entities_limit
)
SELECT 'fact' AS part, f.rank, 1 AS edge, f.entity_id, f.name, f.kind, f.mention_count,
       f.last_seen_at, f.relation_id, f.relation, f.direction, f.object_id, f.value,
       f.single_valued, f.memory_id, f.source_turn_ids, f.valid_from
FROM facts f
UNION ALL
SELECT 'entity', t.rank, coalesce(e.edge, 0), t.id, t.name, t.kind, t.mention_count,
       t.last_seen_at, e.relation_id, e.relation, e.direction, e.other_id, e.value,
       e.single_valued, e.memory_id, e.source_turn_ids, e.valid_from
FROM top t
LEFT JOIN LATERAL (
  SELECT row_number() OVER (ORDER BY valid_from DESC NULLS LAST, created_at DESC,
                                     relation_id) AS edge, edges.*
  FROM (
    SELECT r.id AS relation_id, r.relation, 'out'::text AS direction, r.object_id AS other_id,
           coalesce(o.name, r.value) AS value, r.single_valued, r.memory_id,
           r.source_turn_ids, r.valid_from, r.created_at
    FROM entity_relations r
    LEFT JOIN entities o ON o.id = r.object_id
    WHERE r.tenant = :tenant AND r.user_id = :user_id AND r.subject_id = t.id AND {_CURRENT}
    UNION ALL
    SELECT r.id, r.relation, 'in', r.subject_id, s.name, r.single_valued, r.memory_id,
           r.source_turn_ids, r.valid_from, r.created_at
    FROM entity_relations r
    JOIN entities s ON s.id = r.subject_id
    WHERE r.object_id = t.id AND r.subject_id <> t.id
      AND r.tenant = :tenant AND r.user_id = :user_id AND {_CURRENT}
  ) edges
  ORDER BY edge
  LIMIT :relations_limit
) e ON true
ORDER BY part DESC, rank, edge
""")


def _clamp(value: int, high: int) -> int:
    return max(0, min(value, high))


def _provenance(row: Any) -> dict[str, Any]:
    return {
        "relation_id": row.relation_id,
        "value": row.value,
        "value_entity_id": row.object_id,
        "memory_id": row.memory_id,
        "source_turn_ids": list(row.source_turn_ids),
        "valid_from": row.valid_from,
    }


def _facts(rows: list[Any]) -> list[SubjectFacts]:
    # Rows arrive ordered by entity rank: one entity's slots are adjacent.
    return [
        SubjectFacts(
            entity_id=entity_id, name=first.name, kind=first.kind,
            slots={r.relation: SlotValue(**_provenance(r)) for r in [first, *rest]},
        )
        for entity_id, (first, *rest) in ((k, list(g)) for k, g in groupby(rows, _entity))
    ]  # fmt: skip


def _relation(row: Any) -> ProfileRelation:
    return ProfileRelation(
        **_provenance(row), relation=row.relation, direction=row.direction,
        single_valued=row.single_valued,
    )  # fmt: skip


def _entities(rows: list[Any]) -> list[ProfileEntity]:
    return [
        ProfileEntity(
            entity_id=entity_id, name=first.name, kind=first.kind,
            mention_count=first.mention_count, last_seen_at=first.last_seen_at,
            relations=[_relation(r) for r in [first, *rest] if r.relation_id is not None],
        )
        for entity_id, (first, *rest) in ((k, list(g)) for k, g in groupby(rows, _entity))
    ]  # fmt: skip


def _entity(row: Any) -> uuid.UUID:
    entity_id: uuid.UUID = row.entity_id
    return entity_id


async def _known(session: AsyncSession, *, tenant: str, user_id: str) -> bool:
    """Whether the tenant has the user at all: sessions, turns, memories or entities."""
    owned = [
        select(model.tenant).where(model.tenant == tenant, model.user_id == user_id)
        for model in (Memory, Turn, ChatSession, Entity)
    ]
    return bool(await session.scalar(select(or_(*(exists(q) for q in owned)))))


async def get_profile(
    session: AsyncSession,
    *,
    tenant: str,
    user_id: str,
    entities_limit: int = DEFAULT_ENTITIES,
    relations_limit: int = DEFAULT_RELATIONS,
) -> UserProfile:
    """The user's current slot values by entity, and their top entities with their
    current relations; NotFound for a user the tenant does not have."""
    params = {
        "tenant": tenant,
        "user_id": user_id,
        "facts_limit": MAX_FACTS,
        "entities_limit": _clamp(entities_limit, MAX_ENTITIES),
        "relations_limit": _clamp(relations_limit, MAX_RELATIONS),
    }
    rows = list((await session.execute(PROFILE_SQL, params)).all())
    if not rows and not await _known(session, tenant=tenant, user_id=user_id):
        raise NotFound(f"user {user_id!r} not found")
    return UserProfile(
        user_id=user_id,
        facts=_facts([r for r in rows if r.part == "fact"]),
        entities=_entities([r for r in rows if r.part == "entity"]),
    )
