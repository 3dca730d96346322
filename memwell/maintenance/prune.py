"""prune: tombstone what is expired or too weak to keep; hard-delete old tombstones.

Phase 1 (tombstone) walks live memories by primary key. A memory is tombstoned when
it is not pinned, its importance is under the importance floor, and one of:
- `expires_at` has passed (set per memory by a client or a pipeline);
- its kind has a TTL policy (settings `ttl_days_by_kind`, e.g. episodes 90 days) and
  it has not been stored, reinforced or used for that long: reinforcement moves
  `updated_at`, so a reinforced episode gets a fresh TTL;
- its retention strength (retention.py, recomputed at `now`) is under the floor.
Pinned and important memories are never pruned, not even by an expiry: the flag and
the floor are the caller's explicit "keep this".

Phase 2 (hard delete) walks tombstones older than the grace period. Superseded rows
that point at a row being deleted are tombstoned first, so the foreign key's SET NULL
cannot resurrect them as live memories. History (memory_events) is kept: it has no
foreign key and outlives the row.

Phase 3 deletes the records of dropped turns (memwell/intake/dropped_turns.py) older
than their retention: like a tombstone, such a record answers for a while (a turn's
status reads `dropped`, a late delivery of the turn is dropped too) and then goes, so
the table does not grow with every clear for ever. Past it, a turn that was dropped
reads `unknown`; an erased user's late turns stay dropped by the erasure's own
tombstone.

Every phase locks with FOR UPDATE SKIP LOCKED and re-checks its predicate on the row
it locks, so two runs at once act on each row exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.errors import ConfigurationError
from memwell.core.settings import Settings
from memwell.db.models import MEMORY_KINDS
from memwell.maintenance.batches import BatchResult, Cursor, JobReport, run_batches
from memwell.maintenance.decay import MIN_UUID
from memwell.maintenance.retention import STRENGTH_SQL, RetentionPolicy

_EPOCH = "1970-01-01T00:00:00+00:00"


@dataclass(frozen=True)
class PrunePolicy:
    retention: RetentionPolicy
    retention_floor: float = 0.05
    importance_floor: float = 0.8
    grace: timedelta = timedelta(days=30)
    dropped_turns_retention: timedelta = timedelta(days=30)
    ttl_days_by_kind: tuple[tuple[str, float], ...] = (("episode", 90.0),)

    def __post_init__(self) -> None:
        unknown = {k for k, _ in self.ttl_days_by_kind} - set(MEMORY_KINDS)
        if unknown:
            raise ConfigurationError(f"TTL policy names unknown memory kinds: {sorted(unknown)}")

    @classmethod
    def from_settings(cls, settings: Settings) -> PrunePolicy:
        return cls(
            retention=RetentionPolicy.from_settings(settings),
            retention_floor=settings.prune_retention_floor,
            importance_floor=settings.prune_importance_floor,
            grace=timedelta(days=settings.prune_grace_days),
            dropped_turns_retention=timedelta(days=settings.dropped_turns_retention_days),
            ttl_days_by_kind=tuple(sorted(settings.ttl_days_by_kind.items())),
        )


_TOMBSTONE = text(
    f"""
    WITH candidates AS (
        SELECT m.id, m.tenant, m.user_id, m.content,
               CASE WHEN m.expires_at <= CAST(:now AS timestamptz) THEN 'expired'
                    WHEN ttl.days IS NOT NULL
                         AND greatest(m.updated_at, m.last_accessed_at)
                             + ttl.days * interval '1 day' <= CAST(:now AS timestamptz)
                         THEN 'ttl'
                    WHEN {STRENGTH_SQL} < :floor THEN 'weak'
               END AS reason
        FROM memories m
        LEFT JOIN unnest(CAST(:ttl_kinds AS text[]), CAST(:ttl_days AS float8[]))
             AS ttl(kind, days) ON ttl.kind = m.kind
        WHERE m.id > CAST(:after AS uuid)
          AND m.deleted_at IS NULL AND m.superseded_by IS NULL
          AND NOT m.pinned AND m.importance < :imp_floor
        ORDER BY m.id
        LIMIT :n
        FOR UPDATE OF m SKIP LOCKED
    ), doomed AS (
        SELECT * FROM candidates WHERE reason IS NOT NULL
    ), gone AS (
        UPDATE memories m SET deleted_at = CAST(:now AS timestamptz)
        FROM doomed d WHERE m.id = d.id
        RETURNING m.id
    ), logged AS (
        INSERT INTO memory_events (tenant, user_id, memory_id, event, old_content, reason,
                                   created_at)
        SELECT tenant, user_id, id, 'delete', content, 'prune: ' || reason,
               CAST(:now AS timestamptz)
        FROM doomed
    )
    SELECT (SELECT count(*) FROM candidates) AS scanned,
           (SELECT count(*) FROM doomed WHERE reason = 'expired') AS expired,
           (SELECT count(*) FROM doomed WHERE reason = 'ttl') AS ttl,
           (SELECT count(*) FROM doomed WHERE reason = 'weak') AS weak,
           (SELECT CAST(id AS text) FROM candidates ORDER BY id DESC LIMIT 1) AS last_id
    """
)

_TOMBSTONE_BATCH = text(
    """
    SELECT id, deleted_at FROM memories
    WHERE deleted_at IS NOT NULL AND deleted_at < CAST(:cutoff AS timestamptz)
      AND (deleted_at, id) > (CAST(:after_at AS timestamptz), CAST(:after_id AS uuid))
    ORDER BY deleted_at, id
    LIMIT :n
    FOR UPDATE SKIP LOCKED
    """
)

# History of a memory about to vanish: tombstone it so SET NULL cannot revive it.
_ORPHANS = text(
    """
    WITH orphaned AS (
        UPDATE memories m SET deleted_at = CAST(:now AS timestamptz)
        WHERE m.superseded_by = ANY(CAST(:ids AS uuid[])) AND m.deleted_at IS NULL
        RETURNING m.id, m.tenant, m.user_id, m.content
    ), logged AS (
        INSERT INTO memory_events (tenant, user_id, memory_id, event, old_content, reason,
                                   created_at)
        SELECT tenant, user_id, id, 'delete', content, 'prune: history of a deleted memory',
               CAST(:now AS timestamptz)
        FROM orphaned
    )
    SELECT count(*) FROM orphaned
    """
)

_HARD_DELETE = text("DELETE FROM memories WHERE id = ANY(CAST(:ids AS uuid[]))")

_EXPIRED_DROPS = text(
    """
    SELECT tenant, turn_hash, dropped_at FROM dropped_turns
    WHERE dropped_at < CAST(:cutoff AS timestamptz)
      AND (dropped_at, tenant, turn_hash)
          > (CAST(:after_at AS timestamptz), :after_tenant, :after_hash)
    ORDER BY dropped_at, tenant, turn_hash
    LIMIT :n
    FOR UPDATE SKIP LOCKED
    """
)

_DELETE_DROPS = text(
    """
    DELETE FROM dropped_turns d
    USING unnest(CAST(:tenants AS text[]), CAST(:hashes AS text[])) AS x(tenant, turn_hash)
    WHERE d.tenant = x.tenant AND d.turn_hash = x.turn_hash
    """
)


def tombstone_batch(
    session: Session, cursor: Cursor | None, *, now: datetime, policy: PrunePolicy, batch_size: int
) -> BatchResult:
    """Tombstone the prunable memories among the next `batch_size` live ones."""
    row = session.execute(
        _TOMBSTONE,
        {
            "after": cursor[0] if cursor else MIN_UUID,
            "n": batch_size,
            "now": now,
            "floor": policy.retention_floor,
            "imp_floor": policy.importance_floor,
            "ttl_kinds": [k for k, _ in policy.ttl_days_by_kind],
            "ttl_days": [d for _, d in policy.ttl_days_by_kind],
            **policy.retention.binds(),
        },
    ).one()
    done = row.scanned < batch_size or row.last_id is None
    return BatchResult(
        counts={
            "scanned": int(row.scanned),
            "tombstoned_expired": int(row.expired),
            "tombstoned_ttl": int(row.ttl),
            "tombstoned_weak": int(row.weak),
        },
        cursor=None if done else [str(row.last_id)],
    )


def hard_delete_batch(
    session: Session, cursor: Cursor | None, *, now: datetime, policy: PrunePolicy, batch_size: int
) -> BatchResult:
    """Delete up to `batch_size` tombstones older than the grace period."""
    after_at, after_id = cursor if cursor else (_EPOCH, MIN_UUID)
    rows = session.execute(
        _TOMBSTONE_BATCH,
        {"cutoff": now - policy.grace, "after_at": after_at, "after_id": after_id, "n": batch_size},
    ).all()
    ids = [r.id for r in rows]
    orphans = session.execute(_ORPHANS, {"ids": ids, "now": now}).scalar_one() if ids else 0
    if ids:
        session.execute(_HARD_DELETE, {"ids": ids})
    done = len(rows) < batch_size
    return BatchResult(
        counts={"hard_deleted": len(ids), "tombstoned_history": int(orphans)},
        cursor=None if done else [rows[-1].deleted_at.isoformat(), str(rows[-1].id)],
    )


def expire_dropped_batch(
    session: Session, cursor: Cursor | None, *, now: datetime, policy: PrunePolicy, batch_size: int
) -> BatchResult:
    """Delete up to `batch_size` records of dropped turns older than their retention."""
    after_at, after_tenant, after_hash = cursor if cursor else (_EPOCH, "", "")
    rows = session.execute(
        _EXPIRED_DROPS,
        {
            "cutoff": now - policy.dropped_turns_retention,
            "after_at": after_at,
            "after_tenant": after_tenant,
            "after_hash": after_hash,
            "n": batch_size,
        },
    ).all()
    if rows:
        session.execute(
            _DELETE_DROPS,
            {"tenants": [r.tenant for r in rows], "hashes": [r.turn_hash for r in rows]},
        )
    last = rows[-1] if len(rows) == batch_size else None
    return BatchResult(
        counts={"dropped_turns_expired": len(rows)},
        cursor=None if last is None else [last.dropped_at.isoformat(), last.tenant, last.turn_hash],
    )


def prune_memories(
    sessions: sessionmaker[Session],
    *,
    now: datetime,
    policy: PrunePolicy,
    batch_size: int,
    max_batches: int,
    dry_run: bool = False,
    cursor: Cursor | None = None,
) -> JobReport:
    """Tombstone, then hard-delete, then expire dropped turns' records, each phase in
    bounded batches. `cursor` continues an unfinished tombstone walk; the other phases
    always walk their (small) indexes from the oldest row."""
    tomb = run_batches(
        sessions,
        lambda s, c: tombstone_batch(s, c, now=now, policy=policy, batch_size=batch_size),
        job="prune:tombstone",
        max_batches=max_batches,
        dry_run=dry_run,
        cursor=cursor,
    )
    hard = run_batches(
        sessions,
        lambda s, c: hard_delete_batch(s, c, now=now, policy=policy, batch_size=batch_size),
        job="prune:hard-delete",
        max_batches=max_batches,
        dry_run=dry_run,
    )
    drops = run_batches(
        sessions,
        lambda s, c: expire_dropped_batch(s, c, now=now, policy=policy, batch_size=batch_size),
        job="prune:dropped-turns",
        max_batches=max_batches,
        dry_run=dry_run,
    )
    return JobReport(
        job="prune",
        dry_run=dry_run,
        batches=tomb.batches + hard.batches + drops.batches,
        counts={**tomb.counts, **hard.counts, **drops.counts},
        cursor=tomb.cursor,
    )
