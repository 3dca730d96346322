"""A reconcile batch's writes, planned in Python and applied in a few statements.

Writing each candidate as it was decided cost one round trip per memory (plus
SQLAlchemy's per-statement overhead), which was most of reconcile's time. Instead,
the batch reads which normalised contents its users already hold live (one
statement), predicts each upsert's outcome from that (insert with a new id, or
reinforce the live row), and queues the write. `WritePlan.execute` then applies
the queue in decision order, so every statement sees the same rows it would have
seen one by one; consecutive inserts (most of a batch) become one multi-row
INSERT, which is equivalent because a plan never inserts two live rows with one
content hash.

The same transaction and savepoint store each written memory's entities, links and
relations (memwell/entities/store.py) after the memory rows, in a few statements for
the whole batch: a memory and its entities commit or roll back together.

The prediction holds because the batch holds its users' advisory locks. A writer
that does not take them (a session summary) can still race it: then an insert
hits the live-hash unique index, or a reinforced row is no longer live. Either
raises `PlanStale` (an IntegrityError is turned into one by the caller), and the
caller re-plans from fresh reads inside a savepoint.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from sqlalchemy import CursorResult, Executable, insert, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from memwell.db.models import Memory, MemoryEmbedding
from memwell.entities.extract import extract
from memwell.entities.store import EntitySource, write_entities
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.store_keys import memory_hash
from memwell.reembed.dual_write import route_new_rows

LiveKey = tuple[str, str, str]  # (tenant, user_id, content_hash)


class PlanStale(Exception):
    """The database no longer matches what the plan predicted; re-plan."""


_LIVE_HASHES = text(
    """
    SELECT m.tenant, m.user_id, m.content_hash, m.id
    FROM memories m
    JOIN unnest(CAST(:tenants AS text[]), CAST(:users AS text[]), CAST(:hashes AS text[]))
         AS c(tenant, user_id, content_hash)
      ON m.tenant = c.tenant AND m.user_id = c.user_id AND m.content_hash = c.content_hash
    WHERE m.deleted_at IS NULL AND m.superseded_by IS NULL
    """
)

# For a row the plan knows is live: an exact duplicate reinforces it.
_REINFORCE = text(
    """
    UPDATE memories SET
        reinforcement_count = reinforcement_count + 1,
        last_seen_at = greatest(last_seen_at, :at),
        importance = greatest(importance, :importance),
        updated_at = now(),
        source_turn_ids = ARRAY(
            SELECT DISTINCT unnest(source_turn_ids || CAST(:sources AS text[])))
    WHERE id = :id AND deleted_at IS NULL AND superseded_by IS NULL
    """
)


def fetch_live_hashes(
    session: Session, candidates: Sequence[Candidate], digests: Sequence[str]
) -> dict[LiveKey, uuid.UUID]:
    """The live memory holding each candidate's normalised content, where one does."""
    if not candidates:
        return {}
    rows = session.execute(
        _LIVE_HASHES,
        {
            "tenants": [c.tenant for c in candidates],
            "users": [c.user_id for c in candidates],
            "hashes": list(digests),
        },
    )
    return {(r.tenant, r.user_id, r.content_hash): r.id for r in rows}


@dataclass
class WritePlan:
    """Queued writes, and the live (tenant, user, hash) -> id map they will leave."""

    live: dict[LiveKey, uuid.UUID]
    model: str
    #: store the entities of the memories written (MEMWELL_ENTITIES_ENABLED)
    entities: bool = True
    #: (tenant, user) whose ANN index leaves new rows out until they are folded in
    #: (memwell/retrieval/ann.py): their inserts skip the index's graph
    deferred_users: frozenset[tuple[str, str]] = frozenset()
    _ops: list[list[dict[str, Any]] | Executable | dict[str, Any]] = field(default_factory=list)
    _stated: list[tuple[uuid.UUID, Candidate, str]] = field(default_factory=list)

    def states(self, memory_id: uuid.UUID, c: Candidate, content: str) -> None:
        """Record that the memory now reads `content`, written for `c`: its entities
        are stored with the batch. A reinforcement states nothing new."""
        self._stated.append((memory_id, c, content))

    def entity_sources(self) -> list[EntitySource]:
        """What the written memories mention (a candidate's own extraction when its
        text is the one stored, as LLM mode gives it; the local extractor otherwise).
        A summary links its entities but states no relations: it restates older turns
        at the session's last time, and would bring a superseded value back."""
        sources = []
        for memory_id, c, content in self._stated:
            own = c.entities is not None and content == c.content
            extraction = c.entities if own and c.entities is not None else extract(content)
            if c.kind == "summary":
                extraction = replace(extraction, relations=(), aliases=())
            sources.append(
                EntitySource(
                    tenant=c.tenant,
                    user_id=c.user_id,
                    memory_id=memory_id,
                    event_time=c.valid_from or c.event_time,
                    source_turn_ids=c.source_turn_ids,
                    extraction=extraction,
                )
            )
        return sources

    def upsert(self, c: Candidate, digest: str, vector: np.ndarray) -> tuple[uuid.UUID, bool]:
        """Queue the candidate's insert, or the reinforcement of the live memory with the
        same normalised content; returns (id, added)."""
        key = (c.tenant, c.user_id, digest)
        existing = self.live.get(key)
        if existing is not None:
            self._ops.append(
                {
                    "id": existing,
                    "at": c.event_time,
                    "importance": c.importance,
                    "sources": c.source_turn_ids,
                }
            )
            return existing, False
        memory_id = uuid.uuid4()
        self.live[key] = memory_id
        self.states(memory_id, c, c.content)
        row = {
            "id": memory_id,
            "tenant": c.tenant,
            "user_id": c.user_id,
            "agent_id": c.agent_id,
            "session_id": c.session_id,
            "kind": c.kind,
            "content": c.content,
            "content_hash": digest,
            "embedding": vector,
            "embedding_model": self.model,
            "importance": c.importance,
            "created_at": c.event_time,
            "valid_from": c.valid_from or c.event_time,
            "valid_to": c.valid_to,
            "last_seen_at": c.event_time,
            "source_turn_ids": c.source_turn_ids,
            "metadata_": c.metadata,
            "pinned": c.pinned,
            "expires_at": c.expires_at,
            "ann_deferred": (c.tenant, c.user_id) in self.deferred_users,
        }
        last = self._ops[-1] if self._ops else None
        if isinstance(last, list):
            last.append(row)
        else:
            self._ops.append([row])
        return memory_id, True

    def update(
        self,
        stmt: Executable,
        *,
        tenant: str,
        user_id: str,
        memory_id: uuid.UUID,
        old_hash: str,
        new_hash: str | None,
    ) -> None:
        """Queue an update that retires a row's hash (new_hash None) or changes it."""
        old = (tenant, user_id, old_hash)
        if self.live.get(old) == memory_id:
            del self.live[old]
        if new_hash is not None:
            self.live[(tenant, user_id, new_hash)] = memory_id
        self._ops.append(stmt)

    def execute(self, session: Session) -> None:
        """Apply the queue in order; PlanStale when a prediction turns out wrong."""
        for op in self._ops:
            if isinstance(op, list):
                # During a re-embed, each row goes in its user's model, with the other
                # model's vector beside it (memwell/reembed/dual_write.py).
                beside = route_new_rows(session, op, self.model)
                session.execute(insert(Memory), op)
                if beside:
                    session.execute(insert(MemoryEmbedding), beside)
            elif isinstance(op, dict):
                result: CursorResult[Any] = session.execute(_REINFORCE, op)  # type: ignore[assignment]
                if result.rowcount != 1:
                    raise PlanStale(f"memory {op['id']} is no longer live")
            else:
                session.execute(op)
        if self.entities and self._stated:
            write_entities(session, self.entity_sources())


PLAN_ATTEMPTS = 3  # a re-plan only follows a race with a writer outside the lock


def write_memories(
    session: Session,
    candidates: Sequence[Candidate],
    vectors: np.ndarray,
    model: str,
    *,
    entities: bool = True,
) -> list[tuple[uuid.UUID, bool]]:
    """Memories through the same plan as a consolidation batch, without reconciling:
    each is added, or reinforces the live memory with the same normalised content.
    Returns (id, added) per candidate, in order."""
    digests = [memory_hash(c.content, c.metadata) for c in candidates]
    for attempt in range(1, PLAN_ATTEMPTS + 1):
        live = fetch_live_hashes(session, candidates, digests)
        plan = WritePlan(live=live, model=model, entities=entities)
        written = [
            plan.upsert(c, digest, vector)
            for c, digest, vector in zip(candidates, digests, vectors, strict=True)
        ]
        try:
            with session.begin_nested():  # a stale plan rolls back alone, then re-plans
                plan.execute(session)
        except (PlanStale, IntegrityError):
            if attempt == PLAN_ATTEMPTS:
                raise
            continue
        return written
    raise AssertionError("unreachable")


def write_memory(
    session: Session, c: Candidate, vector: np.ndarray, model: str
) -> tuple[uuid.UUID, bool]:
    """One memory through the same plan: added, or reinforcing its exact duplicate."""
    return write_memories(session, [c], np.asarray([vector]), model)[0]
