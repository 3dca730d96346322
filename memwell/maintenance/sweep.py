"""sweep: re-dispatch turns stuck in `pending`, and report dead letters.

A turn is stuck when it was received (or last re-dispatched) longer ago than
`older_than` and is still pending: its dispatch was lost (broker restart, producer
crash between commit and send), or its consolidate task failed for good. The sweeper
claims such turns with SKIP LOCKED and stamps `dispatched_at`, so a second sweeper
running at once skips them, and the next run leaves them alone for another
`older_than`. The consolidate task is idempotent, so a re-dispatch of a turn that was
merely slow costs nothing but a no-op task.

While the consolidation queues hold a backlog, pending turns are queued, not lost:
the sweep then re-dispatches nothing, instead of doubling the backlog.

A turn re-dispatched `max_attempts` times without success is marked `failed` with a
reason, so it stops cycling and an operator sees it.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import redis
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import DeadLetter
from memwell.intake import redis_inbox
from memwell.maintenance.batches import BatchResult, Cursor, JobReport, run_batches

log = logging.getLogger(__name__)

Dispatch = Callable[[str, list[str]], None]
_EPOCH = "1970-01-01T00:00:00+00:00"

_CLAIM = text(
    """
    WITH batch AS (
        SELECT tenant, id, received_at FROM turns
        WHERE status = 'pending'
          AND received_at < CAST(:cutoff AS timestamptz)
          AND coalesce(dispatched_at, received_at) < CAST(:cutoff AS timestamptz)
          AND (received_at, tenant COLLATE "C", id COLLATE "C")
              > (CAST(:after_at AS timestamptz), :after_t, :after_id)
        -- "C": byte order, which for UTF-8 is Python's str order (the cursor's).
        ORDER BY received_at, tenant COLLATE "C", id COLLATE "C"
        LIMIT :n
        FOR UPDATE SKIP LOCKED
    )
    UPDATE turns t
    SET dispatched_at = CAST(:now AS timestamptz),
        attempts = t.attempts + 1,
        status = CASE WHEN t.attempts + 1 > :max_attempts THEN 'failed' ELSE t.status END,
        error = CASE WHEN t.attempts + 1 > :max_attempts
                     THEN 'sweep: still pending after ' || :max_attempts || ' re-dispatches'
                     ELSE t.error END
    FROM batch b
    WHERE t.tenant = b.tenant AND t.id = b.id
    RETURNING t.tenant, t.id, t.status, b.received_at
    """
)


@dataclass(frozen=True)
class SweepPolicy:
    older_than: timedelta = timedelta(minutes=5)
    max_attempts: int = 20
    chunk: int = 64  # turns per consolidate task


def sweep_batch(
    session: Session,
    cursor: Cursor | None,
    *,
    now: datetime,
    policy: SweepPolicy,
    dispatch: Dispatch,
    batch_size: int,
) -> BatchResult:
    """Claim up to `batch_size` stuck turns; dispatch them once the claim commits."""
    after = cursor or [_EPOCH, "", ""]
    claimed = session.execute(
        _CLAIM,
        {
            "cutoff": now - policy.older_than,
            "now": now,
            "max_attempts": policy.max_attempts,
            "after_at": after[0],
            "after_t": after[1],
            "after_id": after[2],
            "n": batch_size,
        },
    ).all()
    # RETURNING has no order; the cursor needs the last claimed key.
    rows = sorted(claimed, key=lambda r: (r.received_at, r.tenant, r.id))
    by_tenant: dict[str, list[str]] = defaultdict(list)
    failed = 0
    for row in rows:
        if row.status == "failed":
            failed += 1
        else:
            by_tenant[row.tenant].append(row.id)

    def send() -> None:
        for tenant, ids in by_tenant.items():
            for start in range(0, len(ids), policy.chunk):
                dispatch(tenant, ids[start : start + policy.chunk])

    last = rows[-1] if rows else None
    return BatchResult(
        counts={"redispatched": sum(len(v) for v in by_tenant.values()), "gave_up": failed},
        cursor=None
        if last is None or len(rows) < batch_size
        else [last.received_at.isoformat(), last.tenant, last.id],
        after_commit=send,
    )


@dataclass(frozen=True)
class DeadLetterReport:
    open: int
    new: int
    by_task: dict[str, int]


def report_dead_letters(session: Session, *, since: datetime) -> DeadLetterReport:
    """Dead letters not yet replayed: all of them, and those new since `since`."""
    rows = session.execute(
        select(
            DeadLetter.task_name,
            func.count(),
            func.count().filter(DeadLetter.created_at >= since),
        )
        .where(DeadLetter.replayed_at.is_(None))
        .group_by(DeadLetter.task_name)
    ).all()
    report = DeadLetterReport(
        open=sum(r[1] for r in rows),
        new=sum(r[2] for r in rows),
        by_task={r[0]: int(r[1]) for r in rows},
    )
    if report.new:
        log.warning(
            "dead letters: %d new since %s, %d open %s (replay them after fixing the cause)",
            report.new,
            since.isoformat(),
            report.open,
            report.by_task,
        )
    return report


def sweep_pending(
    sessions: sessionmaker[Session],
    *,
    now: datetime,
    policy: SweepPolicy,
    dispatch: Dispatch,
    batch_size: int,
    max_batches: int,
    backlog: int = 0,
    backlog_threshold: int | None = None,
    report_since: datetime | None = None,
    dry_run: bool = False,
) -> JobReport:
    """Re-dispatch stuck pending turns (unless a backlog explains them), then count
    dead letters."""
    if backlog_threshold is not None and backlog > backlog_threshold:
        log.info(
            "sweep: %d messages queued, over %d: not re-dispatching", backlog, backlog_threshold
        )
        report = JobReport(job="sweep", dry_run=dry_run, counts={"skipped_backlog": backlog})
    else:
        report = run_batches(
            sessions,
            lambda s, c: sweep_batch(
                s, c, now=now, policy=policy, dispatch=dispatch, batch_size=batch_size
            ),
            job="sweep",
            max_batches=max_batches,
            dry_run=dry_run,
        )
    with sessions() as session:
        letters = report_dead_letters(session, since=report_since or now - policy.older_than)
    report.counts.update({"dead_letters_open": letters.open, "dead_letters_new": letters.new})
    return report


def resend_stale_inbox(
    client: redis.Redis,
    *,
    older_than_s: float,
    now: datetime,
    send: Callable[[str, bytes], None],
    limit: int,
    dry_run: bool = False,
) -> int:
    """Re-send enqueue_turn payloads that no worker has persisted after `older_than_s`
    (memwell/intake/redis_inbox.py); returns how many."""
    if dry_run:
        return int(client.zcount(redis_inbox.INDEX_KEY, "-inf", now.timestamp() - older_than_s))
    payloads = redis_inbox.claim_stale(
        client, older_than_s=older_than_s, now=now.timestamp(), limit=limit
    )
    for task_id, body in payloads:
        send(task_id, body)
    if payloads:
        log.info("sweep: re-sent %d enqueued payloads no worker persisted", len(payloads))
    return len(payloads)
