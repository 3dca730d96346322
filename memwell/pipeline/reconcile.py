"""Step 5: reconcile new candidate memories against their nearest live neighbours.

For each candidate, in order, against the user's live memories (found in one SQL
statement for the whole batch) and the memories this batch already added:

1. exact duplicate (same normalised content): reinforce the existing memory;
2. a changed fact about the same subject (memwell/pipeline/slots.py, or the LLM's
   call): supersede. The old row gets valid_to and superseded_by, the new one is live;
3. a paraphrase (cosine >= merge threshold and the fact guard of
   memwell/pipeline/dedup.py): merge. Keep the better-written text, the union of
   provenance and the higher importance;
4. otherwise add.

Every change is a `memory_events` row with the old and new content. Decisions are
made in order, but the writes are queued and applied together at the end of the
batch, in a few statements (memwell/pipeline/writes.py).

Concurrency: the batch takes a transaction-scoped advisory lock per (tenant, user),
in sorted order (no deadlocks), before it reads neighbours. Two workers reconciling
near-identical memories for one user therefore run one after the other, and the
second sees the first's rows: no duplicates. Different users never wait on each other.
A consolidate worker already holds these locks from its claim (whole users, see
memwell/pipeline/claim.py), so there the lock costs no wait; other callers (a
session's deletion, direct calls) still queue on it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

import numpy as np
from sqlalchemy import func, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from memwell.core.text import content_hash
from memwell.db.models import Memory, MemoryEvent
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.dedup import MERGE_THRESHOLD_DEFAULT, better_written, decide_merge
from memwell.pipeline.slots import supersedes
from memwell.pipeline.store_keys import UNKEYED_ROW, memory_hash, store_key
from memwell.pipeline.user_lock import lock_users
from memwell.pipeline.writes import PLAN_ATTEMPTS, PlanStale, WritePlan, fetch_live_hashes
from memwell.retrieval.search import vector_literal

log = logging.getLogger(__name__)

Action = Literal["add", "reinforce", "merge", "supersede"]


@dataclass(frozen=True)
class Neighbour:
    id: uuid.UUID
    content: str
    content_hash: str
    kind: str
    similarity: float


@dataclass(frozen=True)
class Decision:
    action: Action
    target: Neighbour | None = None
    content: str | None = None  # the merged text, when the decider rewrote it
    reason: str = ""


@dataclass(frozen=True)
class ReconcilePolicy:
    merge_threshold: float = MERGE_THRESHOLD_DEFAULT
    supersede_floor: float = 0.3
    neighbours: int = 8
    #: store the entities the written memories mention (memwell/entities/)
    entities: bool = True


class Decider(Protocol):
    """LLM mode's judge for candidates with close neighbours; None means "no answer,
    use the local rule"."""

    def decide(self, candidate: Candidate, neighbours: Sequence[Neighbour]) -> Decision | None: ...


@dataclass(frozen=True)
class Outcome:
    """What happened to one candidate: the memory that holds it now and, for a merge or
    a supersession, the other memory involved."""

    action: Action
    memory_id: uuid.UUID
    related_id: uuid.UUID | None = None


@dataclass
class ReconcileReport:
    added: int = 0
    reinforced: int = 0
    merged: int = 0
    superseded: int = 0
    memory_ids: list[uuid.UUID] = field(default_factory=list)
    #: one per candidate, in order
    outcomes: list[Outcome] = field(default_factory=list)
    #: time spent waiting for the users' locks
    lock_wait_ms: float = 0.0

    def count(self, action: Action) -> None:
        name = {"add": "added", "reinforce": "reinforced", "merge": "merged"}.get(
            action, "superseded"
        )
        setattr(self, name, getattr(self, name) + 1)


# One statement per user, the user named by constants: the planner then reads that
# user's rows through ix_memories_user. Named through the unnested candidates instead,
# the user was unknown at planning time and every candidate scanned the whole table,
# so a small user's batch grew with everyone else's memories. A store's keyed items
# (memwell/pipeline/store_keys.py) are never neighbours: nothing merges into them or
# supersedes them.
_NEIGHBOURS = """
    SELECT c.idx, m.id, m.content, m.content_hash, m.kind, 1 - m.dist AS similarity
    FROM unnest(CAST(:idx AS int[]), CAST(:vecs AS vector[])) AS c(idx, vec)
    CROSS JOIN LATERAL (
        SELECT id, content, content_hash, kind, embedding <=> c.vec AS dist
        FROM memories
        WHERE tenant = :tenant AND user_id = :user_id AND embedding_model = :model
          AND deleted_at IS NULL AND superseded_by IS NULL AND {unkeyed}
        ORDER BY embedding <=> c.vec
        LIMIT :k
    ) m
    """
# A user above MEMWELL_ANN_THRESHOLD has an HNSW index of their own
# (memwell/retrieval/ann.py): searched through it, a batch's cost no longer grows with
# the user's store. The index also holds the user's superseded and deleted rows, so
# the scan is iterative (pgvector 0.8): it reads on past them until it has k live
# rows, up to a bounded number of index tuples. Exact duplicates never depend on it
# (they are found by content hash, writes.py). The rows written since the index was
# built and not yet folded into it (the tail) are read once, exactly, and each
# candidate's k nearest come from both.
_ANN_NEIGHBOURS = """
    WITH tail AS MATERIALIZED (
        SELECT id, content, content_hash, kind, embedding
        FROM memories
        WHERE tenant = :tenant AND user_id = :user_id AND embedding_model = :model
          AND ann_deferred AND deleted_at IS NULL AND superseded_by IS NULL AND {unkeyed}
    )
    SELECT c.idx, m.id, m.content, m.content_hash, m.kind, 1 - m.dist AS similarity
    FROM unnest(CAST(:idx AS int[]), CAST(:vecs AS vector[])) AS c(idx, vec)
    CROSS JOIN LATERAL (
        (SELECT id, content, content_hash, kind,
                (embedding::vector({dims})) <=> CAST(c.vec AS vector({dims})) AS dist
         FROM memories
         WHERE tenant = :tenant AND user_id = :user_id AND embedding_model = :model
           AND NOT ann_deferred AND deleted_at IS NULL AND superseded_by IS NULL
           AND {unkeyed}
         ORDER BY (embedding::vector({dims})) <=> CAST(c.vec AS vector({dims}))
         LIMIT :k)
        UNION ALL
        (SELECT id, content, content_hash, kind, embedding <=> c.vec AS dist
         FROM tail ORDER BY dist LIMIT :k)
        ORDER BY dist
        LIMIT :k
    ) m
    """
_ANN_USERS = text(
    """
    SELECT tenant, user_id, dims, defers_new_rows FROM memory_ann_indexes
    WHERE embedding_model = :model
      AND (tenant, user_id) IN (
        SELECT * FROM unnest(CAST(:tenants AS text[]), CAST(:users AS text[])))
    """
)
# Custom plans: a generic plan of a prepared statement knows neither the user (so it
# cannot pick ix_memories_user by the user's row count) nor that the user's partial
# ANN index applies. HNSW's beam (ef_search) and the iterative scan's bound on the
# index tuples it reads keep the ANN search's cost fixed. Scoped to the transaction.
_SEARCH_SETTINGS = text(
    "SELECT set_config('hnsw.ef_search', :ef, true),"
    " set_config('hnsw.iterative_scan', 'strict_order', true),"
    " set_config('hnsw.max_scan_tuples', :max_scan, true),"
    " set_config('plan_cache_mode', 'force_custom_plan', true)"
)
#: HNSW's search beam for a candidate's neighbours. Reconcile needs the few nearest
#: (a duplicate, a paraphrase, the same subject), which a narrow beam finds: on a
#: clustered 50k-row store, recall@8 against the exact scan was 0.96 at 16 and 0.99
#: at 40, the nearest one the same at both, in 60% of the time (measured once;
#: python -m bench.figures.reconcile_scale prints the recall at this beam).
ANN_EF_SEARCH = 16
#: at most this many index tuples read per candidate, live or not
ANN_MAX_SCAN_TUPLES = 2000


def _neighbour(row: Any) -> Neighbour:
    return Neighbour(row.id, row.content, row.content_hash, row.kind, float(row.similarity))


@dataclass(frozen=True)
class AnnUser:
    """A batch user's per-user ANN index, as the registry describes it."""

    dims: int
    #: the index leaves rows with `ann_deferred` out: new rows may skip it
    defers_new_rows: bool


def ann_users(
    session: Session, users: Sequence[tuple[str, str]], model: str
) -> dict[tuple[str, str], AnnUser]:
    """Which of these users have a per-user ANN index of `model`."""
    rows = session.execute(
        _ANN_USERS,
        {"model": model, "tenants": [t for t, _ in users], "users": [u for _, u in users]},
    )
    return {(r.tenant, r.user_id): AnnUser(int(r.dims), bool(r.defers_new_rows)) for r in rows}


def fetch_neighbours(
    session: Session,
    candidates: Sequence[Candidate],
    vectors: np.ndarray,
    *,
    embedding_model: str,
    k: int,
    ann: dict[tuple[str, str], AnnUser] | None = None,
) -> list[list[Neighbour]]:
    """The k nearest live memories of each candidate's user: one statement per user,
    exact, or through the user's ANN index (and its tail) when it has one. `ann`: the
    users' indexes when the caller has read them already."""
    out: list[list[Neighbour]] = [[] for _ in candidates]
    if not candidates:
        return out
    by_user: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(candidates):
        by_user.setdefault((c.tenant, c.user_id), []).append(i)
    if ann is None:
        ann = ann_users(session, sorted(by_user), embedding_model)
    session.execute(
        _SEARCH_SETTINGS,
        {"ef": str(max(ANN_EF_SEARCH, k)), "max_scan": str(ANN_MAX_SCAN_TUPLES)},
    )
    for (tenant, user_id), mine in sorted(by_user.items()):
        index = ann.get((tenant, user_id))
        if index:
            statement = _ANN_NEIGHBOURS.format(dims=index.dims, unkeyed=UNKEYED_ROW)
        else:
            statement = _NEIGHBOURS.format(unkeyed=UNKEYED_ROW)
        rows = session.execute(
            text(statement),
            {
                "idx": mine,
                "vecs": [vector_literal(vectors[i]) for i in mine],
                "tenant": tenant,
                "user_id": user_id,
                "model": embedding_model,
                "k": k,
            },
        )
        for row in rows:
            out[row.idx].append(_neighbour(row))
    return out


def decide_local(
    candidate: Candidate, neighbours: Sequence[Neighbour], policy: ReconcilePolicy
) -> Decision:
    """The documented local rule: exact, then supersede, then merge, else add."""
    digest = content_hash(candidate.content)
    for n in neighbours:
        if n.content_hash == digest:
            return Decision("reinforce", n, reason="exact duplicate")
    ranked = sorted(neighbours, key=lambda n: n.similarity, reverse=True)
    for n in ranked:
        if n.similarity < policy.supersede_floor:
            break
        slot = supersedes(candidate.content, n.content)
        if slot is not None:
            return Decision("supersede", n, reason=f"{slot.relation} of {slot.subject} changed")
    if ranked:
        best = ranked[0]
        merge = decide_merge(
            best.content, candidate.content, best.similarity, threshold=policy.merge_threshold
        )
        if merge.merge:
            return Decision("merge", best, reason=merge.reason)
    return Decision("add", reason="new")


@dataclass
class _BatchState:
    """What this batch changed so far, so later candidates see it."""

    retired: set[uuid.UUID] = field(default_factory=set)
    rewritten: dict[uuid.UUID, Neighbour] = field(default_factory=dict)
    added: list[tuple[Candidate, np.ndarray, Neighbour]] = field(default_factory=list)

    def view(self, c: Candidate, vector: np.ndarray, found: list[Neighbour]) -> list[Neighbour]:
        live = [self.rewritten.get(n.id, n) for n in found if n.id not in self.retired]
        seen = {n.id for n in live}
        for other, other_vec, n in self.added:
            same_user = (other.tenant, other.user_id) == (c.tenant, c.user_id)
            if same_user and n.id not in seen and n.id not in self.retired:
                live.append(replace(n, similarity=float(np.dot(vector, other_vec))))
        return live


def reconcile_batch(
    session: Session,
    candidates: Sequence[Candidate],
    vectors: np.ndarray,
    *,
    embedding_model: str,
    policy: ReconcilePolicy,
    decider: Decider | None = None,
) -> ReconcileReport:
    """Lock the batch's users, decide each candidate in order, then write the batch."""
    if not candidates:
        return ReconcileReport()
    waited = lock_users(session, {(c.tenant, c.user_id) for c in candidates})
    digests = [memory_hash(c.content, c.metadata) for c in candidates]
    for attempt in range(1, PLAN_ATTEMPTS + 1):
        report, plan, events = _plan(
            session, candidates, digests, vectors, embedding_model, policy, decider
        )
        try:
            with session.begin_nested():  # a stale plan rolls back alone, then re-plans
                plan.execute(session)
                # A parameter list, not .values(rows): its statement compiles once and
                # is cached, where a multi-row .values() is compiled anew every batch.
                session.execute(insert(MemoryEvent), events)
        except (PlanStale, IntegrityError):
            if attempt == PLAN_ATTEMPTS:
                raise
            log.warning("reconcile plan went stale (attempt %d); re-planning", attempt)
            continue
        report.lock_wait_ms = waited
        return report
    raise AssertionError("unreachable")


def _plan(
    session: Session,
    candidates: Sequence[Candidate],
    digests: Sequence[str],
    vectors: np.ndarray,
    model: str,
    policy: ReconcilePolicy,
    decider: Decider | None,
) -> tuple[ReconcileReport, WritePlan, list[dict[str, Any]]]:
    """Each candidate's decision, in order, against fresh reads; writes only queued."""
    report = ReconcileReport()
    ann = ann_users(session, sorted({(c.tenant, c.user_id) for c in candidates}), model)
    found = fetch_neighbours(
        session, candidates, vectors, embedding_model=model, k=policy.neighbours, ann=ann
    )
    live = fetch_live_hashes(session, candidates, digests)
    deferred = frozenset(user for user, index in ann.items() if index.defers_new_rows)
    plan = WritePlan(live=live, model=model, entities=policy.entities, deferred_users=deferred)
    state = _BatchState()
    events: list[dict[str, Any]] = []
    for c, digest, vector, near in zip(candidates, digests, vectors, found, strict=True):
        decision = _decide(c, digest, state.view(c, vector, near), policy, decider)
        outcome = _apply(plan, c, digest, vector, decision, state, events)
        report.count(outcome.action)
        report.memory_ids.append(outcome.memory_id)
        report.outcomes.append(outcome)
    return report, plan, events


def _decide(
    c: Candidate,
    digest: str,
    neighbours: list[Neighbour],
    policy: ReconcilePolicy,
    decider: Decider | None,
) -> Decision:
    if store_key(c.metadata) is not None:
        # A key's value replaces only that key's value (its writer's job): it is added,
        # or reinforces its own exact duplicate, and never folds into another memory.
        return Decision("add", reason="a store key's value")
    close = [n for n in neighbours if n.similarity >= policy.supersede_floor]
    exact = any(n.content_hash == digest for n in neighbours)
    if decider is not None and close and not exact:
        decision = decider.decide(c, close)
        if decision is not None:
            return decision
    return decide_local(c, neighbours, policy)


def _event(c: Candidate, memory_id: uuid.UUID, event: str, **extra: Any) -> dict[str, Any]:
    return {
        "tenant": c.tenant,
        "user_id": c.user_id,
        "memory_id": memory_id,
        "event": event,
        "source_turn_ids": c.source_turn_ids,
        "old_content": extra.get("old"),
        "new_content": extra.get("new", c.content),
        "related_memory_id": extra.get("related"),
        "reason": _reason(c, extra.get("reason")),
    }


def _reason(c: Candidate, why: str | None) -> str | None:
    """The decision's reason, prefixed with where the candidate came from when known."""
    if c.origin is None:
        return why
    return f"{c.origin}: {why}" if why else c.origin


def _apply(
    plan: WritePlan,
    c: Candidate,
    digest: str,
    vector: np.ndarray,
    d: Decision,
    state: _BatchState,
    events: list[dict[str, Any]],
) -> Outcome:
    if d.action == "merge" and d.target is not None:
        merged_into = _merge(plan, c, vector, d, state, events)
        return Outcome("merge", merged_into, related_id=merged_into)
    memory_id, added = plan.upsert(c, digest, vector)
    if not added or d.action == "reinforce":
        events.append(_event(c, memory_id, "reinforce", reason=d.reason or "exact duplicate"))
        return Outcome("reinforce", memory_id)
    events.append(_event(c, memory_id, "add", reason=d.reason))
    if store_key(c.metadata) is None:  # a keyed item is no later candidate's neighbour
        me = Neighbour(memory_id, c.content, digest, c.kind, 1.0)
        state.added.append((c, vector, me))
    if d.action == "supersede" and d.target is not None:
        old = d.target
        plan.update(
            update(Memory)
            .where(Memory.id == old.id, Memory.superseded_by.is_(None))
            .values(
                valid_to=c.event_time,
                superseded_by=memory_id,
                updated_at=func.now(),
                **_deferral(plan, c),
            ),
            tenant=c.tenant,
            user_id=c.user_id,
            memory_id=old.id,
            old_hash=old.content_hash,
            new_hash=None,
        )
        state.retired.add(old.id)
        events.append(
            _event(c, old.id, "supersede", old=old.content, related=memory_id, reason=d.reason)
        )
        return Outcome("supersede", memory_id, related_id=old.id)
    return Outcome("add", memory_id)


def _deferral(plan: WritePlan, c: Candidate) -> dict[str, bool]:
    """For an update that writes a new row version into every index anyway (it changes
    an indexed column): the version of a user with a deferring ANN index waits in the
    tail too. Left off other updates, which may stay in place (HOT) and touch no index."""
    return {"ann_deferred": True} if (c.tenant, c.user_id) in plan.deferred_users else {}


def _merge(
    plan: WritePlan,
    c: Candidate,
    vector: np.ndarray,
    d: Decision,
    state: _BatchState,
    events: list[dict[str, Any]],
) -> uuid.UUID:
    target = d.target
    assert target is not None
    kept = d.content or better_written(target.content, c.content)
    kept_hash = content_hash(kept)
    values: dict[str, Any] = {
        "reinforcement_count": Memory.reinforcement_count + 1,
        "last_seen_at": func.greatest(Memory.last_seen_at, c.event_time),
        "importance": func.greatest(Memory.importance, c.importance),
        "updated_at": func.now(),
        "source_turn_ids": func.array(
            text(
                "SELECT DISTINCT unnest(memories.source_turn_ids || CAST(:src AS text[]))"
            ).bindparams(src=c.source_turn_ids)
        ),
    }
    rewritten = kept != target.content
    if rewritten:
        values |= {"content": kept, "content_hash": kept_hash, **_deferral(plan, c)}
        if kept == c.content:
            values["embedding"] = vector
    plan.update(
        update(Memory).where(Memory.id == target.id).values(**values),
        tenant=c.tenant,
        user_id=c.user_id,
        memory_id=target.id,
        old_hash=target.content_hash,
        new_hash=kept_hash,
    )
    if rewritten:
        plan.states(target.id, c, kept)
    state.rewritten[target.id] = replace(target, content=kept, content_hash=kept_hash)
    events.append(_event(c, target.id, "merge", old=target.content, new=kept, reason=d.reason))
    return target.id
