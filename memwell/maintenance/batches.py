"""The batch loop every maintenance job shares.

A job is a `step` that handles one bounded batch after a keyset cursor inside one
transaction and returns what it did plus the next cursor. Each batch commits on its
own, so row locks live for one batch only; a dry run rolls every batch back but still
moves the cursor, so it reports exactly what a real run would do. Cursors are lists
of strings, so a task can carry one to its continuation.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger(__name__)

Cursor = list[str]


@dataclass
class BatchResult:
    """What one batch did. `cursor` None means the walk reached the end; `stop` ends
    this run early (its time or a shared budget is spent), `cursor` saying where the
    next one continues."""

    counts: dict[str, int]
    cursor: Cursor | None
    after_commit: Callable[[], None] | None = None
    stop: bool = False


@dataclass
class JobReport:
    """What a job run did, for logs, the CLI and task results."""

    job: str
    dry_run: bool
    batches: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    cursor: Cursor | None = None  # where the next run continues; None when finished

    @property
    def finished(self) -> bool:
        return self.cursor is None

    def as_dict(self) -> dict[str, object]:
        return {
            "job": self.job,
            "dry_run": self.dry_run,
            "batches": self.batches,
            "finished": self.finished,
            "cursor": self.cursor,
            **self.counts,
        }


Step = Callable[[Session, Cursor | None], BatchResult]


def run_batches(
    sessions: sessionmaker[Session],
    step: Step,
    *,
    job: str,
    max_batches: int,
    dry_run: bool = False,
    cursor: Cursor | None = None,
) -> JobReport:
    """Run `step` batch after batch until the walk ends or `max_batches` is spent."""
    report = JobReport(job=job, dry_run=dry_run, cursor=cursor)
    totals: Counter[str] = Counter()
    for _ in range(max_batches):
        with sessions() as session:
            result = step(session, report.cursor)
            if dry_run:
                session.rollback()
            else:
                session.commit()
        # After the commit: side effects outside Postgres (broker, Redis) must never
        # announce work the database then rolled back.
        if result.after_commit is not None and not dry_run:
            result.after_commit()
        report.batches += 1
        totals.update(result.counts)
        report.cursor = result.cursor
        if result.cursor is None or result.stop:
            break
    report.counts = {k: int(v) for k, v in sorted(totals.items())}
    log.info(
        "maintenance %s%s: %s in %d batch(es)%s",
        job,
        " (dry run)" if dry_run else "",
        ", ".join(f"{k}={v}" for k, v in report.counts.items()) or "nothing to do",
        report.batches,
        "" if report.finished else f"; continues after {report.cursor}",
    )
    return report
