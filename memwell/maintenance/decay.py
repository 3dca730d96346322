"""decay: store each live memory's current retention strength.

Keyset-paged over the primary key; a batch locks its rows with SKIP LOCKED, so two
runs at once split the rows instead of waiting on each other. Only rows whose
strength moved by at least `epsilon` are written, which keeps a run over a quiet
store nearly free of writes (and of WAL). No memory_events row per decay: strength is
derived and can be recomputed from the row at any time.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from memwell.maintenance.batches import BatchResult, Cursor, JobReport, run_batches
from memwell.maintenance.retention import STRENGTH_SQL, RetentionPolicy

MIN_UUID = "00000000-0000-0000-0000-000000000000"
EPSILON = 0.01

_DECAY = text(
    f"""
    WITH batch AS (
        SELECT m.id, {STRENGTH_SQL} AS new_strength
        FROM memories m
        WHERE m.id > CAST(:after AS uuid)
          AND m.deleted_at IS NULL AND m.superseded_by IS NULL AND NOT m.pinned
        ORDER BY m.id
        LIMIT :n
        FOR UPDATE SKIP LOCKED
    ), changed AS (
        UPDATE memories m SET strength = b.new_strength
        FROM batch b
        WHERE m.id = b.id AND abs(m.strength - b.new_strength) >= :eps
        RETURNING m.id
    )
    SELECT (SELECT count(*) FROM batch) AS scanned,
           (SELECT count(*) FROM changed) AS updated,
           (SELECT CAST(id AS text) FROM batch ORDER BY id DESC LIMIT 1) AS last_id
    """
)


def decay_batch(
    session: Session,
    cursor: Cursor | None,
    *,
    now: datetime,
    policy: RetentionPolicy,
    batch_size: int,
) -> BatchResult:
    """Recompute strength for up to `batch_size` live, unpinned memories after `cursor`."""
    after = cursor[0] if cursor else MIN_UUID
    row = session.execute(
        _DECAY,
        {"after": after, "n": batch_size, "now": now, "eps": EPSILON, **policy.binds()},
    ).one()
    done = row.scanned < batch_size or row.last_id is None
    return BatchResult(
        counts={"scanned": int(row.scanned), "updated": int(row.updated)},
        cursor=None if done else [str(row.last_id)],
    )


def decay_memories(
    sessions: sessionmaker[Session],
    *,
    now: datetime,
    policy: RetentionPolicy,
    batch_size: int,
    max_batches: int,
    dry_run: bool = False,
    cursor: Cursor | None = None,
) -> JobReport:
    """Walk live memories in batches and store their strength at `now`."""
    return run_batches(
        sessions,
        lambda s, c: decay_batch(s, c, now=now, policy=policy, batch_size=batch_size),
        job="decay",
        max_batches=max_batches,
        dry_run=dry_run,
        cursor=cursor,
    )
