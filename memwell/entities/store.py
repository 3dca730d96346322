"""Write a batch of memories' entities, aliases, links and relations.

Called by the memory writer (memwell/pipeline/writes.py) inside the same transaction
and savepoint as the memory rows, so a memory and its entities commit or roll back
together. A batch costs a fixed handful of statements whatever its size: one to read
the aliases its names may have, one upsert of its entities, one insert of their new
aliases, one of the memory links (which bumps `mention_count` by the links that were
new), and the relations (memwell/entities/relations.py). Merges (a bare first name
meeting its full name, "her sister" meeting her name) are rare and cost a few
statements each.

The caller holds the users' advisory locks (reconcile takes them), so two batches of
one user never race on the same names.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.orm import Session

from memwell.entities.extract import Extraction, Mention
from memwell.entities.names import first_name
from memwell.entities.relations import RelationRow, write_relations
from memwell.entities.resolve import Resolution, resolve

UserKey = tuple[str, str]


@dataclass(frozen=True)
class EntitySource:
    """One stored memory and what its text mentions."""

    tenant: str
    user_id: str
    memory_id: uuid.UUID
    event_time: datetime
    source_turn_ids: Sequence[str]
    extraction: Extraction


@dataclass(frozen=True)
class EntityWriteReport:
    entities: int = 0
    links: int = 0
    relations: int = 0
    superseded: int = 0
    merged: int = 0


_ALIASES = text(
    """
    SELECT a.tenant, a.user_id, a.alias, e.id, e.key, e.kind
    FROM unnest(CAST(:tenants AS text[]), CAST(:users AS text[]), CAST(:aliases AS text[]))
         AS c(tenant, user_id, alias)
    JOIN entity_aliases a
      ON a.tenant = c.tenant AND a.user_id = c.user_id AND a.alias = c.alias
    JOIN entities e ON e.id = a.entity_id
    """
)

# A vaguer kind ("other") gives way to a precise one; a precise one is kept.
_UPSERT = text(
    """
    INSERT INTO entities (tenant, user_id, key, name, kind, last_seen_at)
    SELECT * FROM unnest(CAST(:tenants AS text[]), CAST(:users AS text[]),
                         CAST(:keys AS text[]), CAST(:names AS text[]),
                         CAST(:kinds AS text[]), CAST(:seen AS timestamptz[]))
    ON CONFLICT (tenant, user_id, key) DO UPDATE SET
        last_seen_at = greatest(entities.last_seen_at, excluded.last_seen_at),
        kind = CASE WHEN entities.kind = 'other' THEN excluded.kind ELSE entities.kind END
    RETURNING tenant, user_id, key, id
    """
)

_NEW_ALIASES = text(
    """
    INSERT INTO entity_aliases (tenant, user_id, alias, entity_id)
    SELECT * FROM unnest(CAST(:tenants AS text[]), CAST(:users AS text[]),
                         CAST(:aliases AS text[]), CAST(:ids AS uuid[]))
    ON CONFLICT DO NOTHING
    """
)

# Only a link that is new counts as a mention: a memory re-linked counts once.
_LINKS = text(
    """
    WITH linked AS (
        INSERT INTO memory_entities (memory_id, entity_id, tenant, user_id)
        SELECT * FROM unnest(CAST(:memories AS uuid[]), CAST(:entities AS uuid[]),
                             CAST(:tenants AS text[]), CAST(:users AS text[]))
        ON CONFLICT DO NOTHING
        RETURNING entity_id
    )
    UPDATE entities SET mention_count = mention_count + n.links
    FROM (SELECT entity_id, count(*) AS links FROM linked GROUP BY entity_id) n
    WHERE entities.id = n.entity_id
    RETURNING n.links
    """
)

# The loser's links, relations and aliases move to the winner; its counts add up.
_MERGE = [
    text(
        "UPDATE memory_entities SET entity_id = :winner WHERE entity_id = :loser "
        "AND memory_id NOT IN (SELECT memory_id FROM memory_entities WHERE entity_id = :winner)"
    ),
    text("DELETE FROM memory_entities WHERE entity_id = :loser"),
    # Two current values of one slot: the winner's stands, the loser's becomes history.
    text(
        """
        UPDATE entity_relations l SET superseded_by = w.id,
            valid_to = coalesce(w.valid_from, now())
        FROM entity_relations w
        WHERE l.subject_id = :loser AND w.subject_id = :winner AND l.relation = w.relation
          AND l.single_valued AND w.single_valued
          AND l.superseded_by IS NULL AND w.superseded_by IS NULL
        """
    ),
    text("UPDATE entity_relations SET subject_id = :winner WHERE subject_id = :loser"),
    text("UPDATE entity_relations SET object_id = :winner WHERE object_id = :loser"),
    text("UPDATE entity_aliases SET entity_id = :winner WHERE entity_id = :loser"),
    text(
        """
        UPDATE entities w SET mention_count = w.mention_count + l.mention_count,
            created_at = least(w.created_at, l.created_at),
            last_seen_at = greatest(w.last_seen_at, l.last_seen_at)
        FROM entities l WHERE w.id = :winner AND l.id = :loser
        """
    ),
    text("DELETE FROM entities WHERE id = :loser"),
]


def _names(extraction: Extraction) -> list[Mention]:
    """Every name the extraction uses: its mentions, then relation ends it did not
    mention (a slot's subject "the user")."""
    mentions = list(extraction.mentions)
    seen = {m.key for m in mentions}
    for r in extraction.relations:
        for key in (r.subject, r.object):
            if key is not None and key not in seen:
                seen.add(key)
                mentions.append(Mention(key, key, "person" if key == r.subject else "other"))
    return mentions


def _lookup_keys(sources: Sequence[EntitySource]) -> dict[UserKey, set[str]]:
    wanted: dict[UserKey, set[str]] = defaultdict(set)
    for s in sources:
        names = wanted[(s.tenant, s.user_id)]
        for m in _names(s.extraction):
            names.add(m.key)
            first = first_name(m.key) if m.kind == "person" else None
            if first:
                names.add(first)
        names.update(alias for alias, _ in s.extraction.aliases)
    return wanted


def write_entities(session: Session, sources: Sequence[EntitySource]) -> EntityWriteReport:
    """Store the batch's entities, aliases, memory links and relations."""
    sources = [s for s in sources if s.extraction.mentions or s.extraction.relations]
    if not sources:
        return EntityWriteReport()
    wanted = _lookup_keys(sources)
    flat = [(u, a) for u, names in wanted.items() for a in sorted(names)]
    stored: dict[UserKey, dict[str, str]] = defaultdict(dict)
    kinds: dict[UserKey, dict[str, str]] = defaultdict(dict)
    ids: dict[tuple[str, str, str], uuid.UUID] = {}
    for row in session.execute(
        _ALIASES,
        {
            "tenants": [u[0] for u, _ in flat],
            "users": [u[1] for u, _ in flat],
            "aliases": [a for _, a in flat],
        },
    ):
        stored[(row.tenant, row.user_id)][row.alias] = row.key
        kinds[(row.tenant, row.user_id)][row.key] = row.kind
        ids[(row.tenant, row.user_id, row.key)] = row.id
    by_user: dict[UserKey, list[EntitySource]] = defaultdict(list)
    for s in sources:
        by_user[(s.tenant, s.user_id)].append(s)
    resolutions = {
        user: resolve(
            stored[user],
            kinds[user],
            [(m.key, m.name, m.kind) for s in group for m in _names(s.extraction)],
            [pair for s in group for pair in s.extraction.aliases],
        )
        for user, group in by_user.items()
    }
    last_seen = {
        (s.tenant, s.user_id): max(x.event_time for x in by_user[(s.tenant, s.user_id)])
        for s in sources
    }
    upserted = _upsert(session, resolutions, last_seen)
    merged = _merge(session, resolutions, ids, upserted)
    ids.update(upserted)
    _add_aliases(session, resolutions, ids)
    links = _link(session, sources, resolutions, ids)
    rows = [
        RelationRow(
            tenant=s.tenant,
            user_id=s.user_id,
            subject_id=ids[(s.tenant, s.user_id, res.key(r.subject))],
            relation=r.relation,
            object_id=None if r.object is None else ids[(s.tenant, s.user_id, res.key(r.object))],
            value=r.value,
            single_valued=r.single_valued,
            memory_id=s.memory_id,
            source_turn_ids=list(s.source_turn_ids),
            valid_from=s.event_time,
        )
        for s in sources
        for res in [resolutions[(s.tenant, s.user_id)]]
        for r in s.extraction.relations
    ]
    added, superseded = write_relations(session, rows)
    return EntityWriteReport(
        entities=len(upserted), links=links, relations=added, superseded=superseded, merged=merged
    )


def _upsert(
    session: Session, resolutions: dict[UserKey, Resolution], last_seen: dict[UserKey, datetime]
) -> dict[tuple[str, str, str], uuid.UUID]:
    rows = [
        (user, key, name, kind)
        for user, res in resolutions.items()
        for key, (kind, name) in sorted(res.entities.items())  # sorted: no lock-order cycles
    ]
    if not rows:
        return {}
    result = session.execute(
        _UPSERT,
        {
            "tenants": [u[0] for u, _, _, _ in rows],
            "users": [u[1] for u, _, _, _ in rows],
            "keys": [k for _, k, _, _ in rows],
            "names": [n for _, _, n, _ in rows],
            "kinds": [kind for _, _, _, kind in rows],
            "seen": [last_seen[u] for u, _, _, _ in rows],
        },
    )
    return {(r.tenant, r.user_id, r.key): r.id for r in result}


def _merge(
    session: Session,
    resolutions: dict[UserKey, Resolution],
    stored_ids: dict[tuple[str, str, str], uuid.UUID],
    upserted: dict[tuple[str, str, str], uuid.UUID],
) -> int:
    merged = 0
    for (tenant, user_id), res in resolutions.items():
        for loser_key, _ in res.merges:
            loser = stored_ids.get((tenant, user_id, loser_key))
            winner = upserted.get((tenant, user_id, res.key(loser_key)))
            if loser is None or winner is None or loser == winner:
                continue  # the loser was never stored: resolving it was the merge
            for stmt in _MERGE:
                session.execute(stmt, {"loser": loser, "winner": winner})
            merged += 1
    return merged


def _add_aliases(
    session: Session,
    resolutions: dict[UserKey, Resolution],
    ids: dict[tuple[str, str, str], uuid.UUID],
) -> None:
    rows = [
        (user, alias, ids[(user[0], user[1], res.key(key))])
        for user, res in resolutions.items()
        for alias, key in sorted(res.new_aliases.items())
        if (user[0], user[1], res.key(key)) in ids
    ]
    if rows:
        session.execute(
            _NEW_ALIASES,
            {
                "tenants": [u[0] for u, _, _ in rows],
                "users": [u[1] for u, _, _ in rows],
                "aliases": [a for _, a, _ in rows],
                "ids": [i for _, _, i in rows],
            },
        )


def _link(
    session: Session,
    sources: Sequence[EntitySource],
    resolutions: dict[UserKey, Resolution],
    ids: dict[tuple[str, str, str], uuid.UUID],
) -> int:
    pairs: dict[tuple[uuid.UUID, uuid.UUID], UserKey] = {}
    for s in sources:
        res = resolutions[(s.tenant, s.user_id)]
        for m in s.extraction.mentions:
            entity = ids[(s.tenant, s.user_id, res.key(m.key))]
            pairs[(s.memory_id, entity)] = (s.tenant, s.user_id)
    if not pairs:
        return 0
    ordered = sorted(pairs.items(), key=lambda p: (str(p[0][1]), str(p[0][0])))
    counts = session.execute(
        _LINKS,
        {
            "memories": [m for (m, _), _ in ordered],
            "entities": [e for (_, e), _ in ordered],
            "tenants": [u[0] for _, u in ordered],
            "users": [u[1] for _, u in ordered],
        },
    ).scalars()
    return int(sum(counts))
