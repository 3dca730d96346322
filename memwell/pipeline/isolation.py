"""One user's poison cannot sink a batch: a batch's users consolidated again one by one
when the batch fails, and a user's turns that keep failing quarantined.

A batch claims whole users (memwell/pipeline/claim.py) and runs in one transaction. An
exception that escapes it for a reason other than a passing one (the database away, the
model's shared rate limit spent, the task's time limit: the caller names these) is a
bug, or data the pipeline cannot take, on some user's rows. Rather than fail every user
of the batch with it, each user the batch held is consolidated again alone, in a
transaction of its own, at once: the other users are processed by this task, not after
retries.

A user that fails alone too has the turns it held marked: `attempts` counted, the
error's kind in `error` (never its text), still pending. Such a user is never taken to
top up another batch, so it cannot sink one again; its turns go to a task of their own,
after a delay that doubles with each attempt. Once a turn has been attempted
QUARANTINE_ATTEMPTS times (every dispatch counts, the sweeper's too), it is
quarantined: `failed`, with a dead letter that names the turns, the task and the
error's kind. Replaying that letter (`memwell dlq replay`), once the cause is fixed,
opens the turns again and consolidates them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Final

from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.redaction import describe
from memwell.db.tenancy import tenant_transaction
from memwell.embeddings import Embedder
from memwell.intake.dead_letters import record_dead_letter
from memwell.pipeline.consolidate import (
    Analyzer,
    ConsolidationConfig,
    ConsolidationReport,
    consolidate_pending,
)
from memwell.pipeline.reconcile import Decider

log = logging.getLogger(__name__)

#: A turn attempted this many times that fails again is quarantined.
QUARANTINE_ATTEMPTS: Final = 3
#: The first retry of a failed user's turns waits this long; each next one twice as long.
RETRY_DELAY_S: Final = 1.0
#: The payload flag by which a replayed quarantine letter opens its turns again.
REOPEN: Final = "reopen_failed"

_RECORD_FAILURE = text(
    """
    UPDATE turns
    SET attempts = attempts + 1,
        status = CASE WHEN attempts + 1 >= :quarantine_at THEN 'failed' ELSE status END,
        error = CASE WHEN attempts + 1 >= :quarantine_at
                     THEN 'quarantined after ' || (attempts + 1) || ' attempts: ' || :error
                     ELSE 'consolidation failed: ' || :error END
    WHERE tenant = :tenant AND id = ANY(CAST(:ids AS text[])) AND status = 'pending'
    RETURNING id, status, attempts
    """
)
_REOPEN = text(
    """
    UPDATE turns SET status = 'pending', attempts = 0, error = NULL
    WHERE tenant = :tenant AND id = ANY(CAST(:ids AS text[])) AND status = 'failed'
    """
)


@dataclass(frozen=True)
class IsolatedReport:
    """A batch's report, and what its failed users' turns became."""

    report: ConsolidationReport
    #: turns of users that failed alone, to hand to a task of their own after `retry_after_s`
    retry: tuple[str, ...] = ()
    retry_after_s: float = RETRY_DELAY_S
    quarantined: tuple[str, ...] = ()


def consolidate_isolated(
    sessions: sessionmaker[Session],
    embedder: Embedder,
    *,
    tenant: str,
    turn_ids: list[str],
    config: ConsolidationConfig,
    analyzer: Analyzer | None,
    decider: Decider | None,
    deadline: float | None,
    passing: tuple[type[BaseException], ...],
    task_name: str,
) -> IsolatedReport:
    """consolidate_pending in a transaction of its own; when it fails for a reason not
    in `passing`, each user it held again alone (see the module docstring)."""

    def run(ids: list[str], *, alone: bool, held: list[tuple[str, str]]) -> ConsolidationReport:
        with tenant_transaction(sessions, tenant) as session:
            return consolidate_pending(
                session, embedder, tenant=tenant, turn_ids=ids, config=config,
                analyzer=analyzer, decider=decider, deadline=deadline, top_up=not alone,
                held=held,
            )  # fmt: skip

    held: list[tuple[str, str]] = []
    users: dict[str, list[str]] = {}
    failure: BaseException
    try:
        return IsolatedReport(run(turn_ids, alone=False, held=held))
    except passing:
        raise
    except Exception as exc:
        if not held:
            raise  # it failed before it held anyone's turns: nobody's poison
        failure = exc
        users = group_by_user(held)
        log.warning(
            "a batch of %d turns of %d users failed (%s)%s",
            len(held), len(users), describe(exc),
            "; consolidating each user alone" if len(users) > 1 else "",
        )  # fmt: skip
    reports: list[ConsolidationReport] = []
    retry: list[str] = []
    quarantined: list[str] = []
    most_attempts = 0
    for ids in users.values():
        error: BaseException = failure
        if len(users) > 1:  # with one user, the batch was that user alone already
            try:
                reports.append(run(ids, alone=True, held=[]))
                continue
            except passing:
                raise
            except Exception as exc:
                error = exc
        failed = record_failure(sessions, tenant=tenant, turn_ids=ids, exc=error,
                                task_name=task_name)  # fmt: skip
        retry += failed.retry
        quarantined += failed.quarantined
        most_attempts = max(most_attempts, failed.attempts)
    held_ids = {turn for _, turn in held}
    unheld = tuple(t for t in turn_ids if t not in held_ids)
    return IsolatedReport(
        merged(reports, deferred=unheld),
        retry=tuple(retry),
        retry_after_s=RETRY_DELAY_S * 2 ** max(0, most_attempts - 1),
        quarantined=tuple(quarantined),
    )


def group_by_user(held: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """Turn ids by user, in the order they were held."""
    users: dict[str, list[str]] = {}
    for user_id, turn_id in held:
        users.setdefault(user_id, []).append(turn_id)
    return users


@dataclass(frozen=True)
class Failure:
    """What one failed user's turns became."""

    retry: list[str]
    quarantined: list[str]
    #: the most attempts among them
    attempts: int


def record_failure(
    sessions: sessionmaker[Session],
    *,
    tenant: str,
    turn_ids: list[str],
    exc: BaseException,
    task_name: str,
) -> Failure:
    """Count a failed attempt on these turns; quarantine the ones attempted
    QUARANTINE_ATTEMPTS times, with a dead letter that names them."""
    error = describe(exc)
    with tenant_transaction(sessions, tenant) as session:
        rows = session.execute(
            _RECORD_FAILURE,
            {"tenant": tenant, "ids": turn_ids, "error": error,
             "quarantine_at": QUARANTINE_ATTEMPTS},
        ).all()  # fmt: skip
        quarantined = sorted(r.id for r in rows if r.status == "failed")
        attempts = max((r.attempts for r in rows), default=0)
        if quarantined:
            record_dead_letter(
                session,
                task_name=task_name,
                payload={"tenant": tenant, "turn_ids": quarantined, REOPEN: True},
                error=f"quarantined after {attempts} attempts: {error}",
                tenant=tenant,
                attempts=attempts,
            )
    retry = sorted(r.id for r in rows if r.status != "failed")
    log.error(
        "%d turns of one user failed consolidation alone (%s): %d to retry, %d quarantined",
        len(rows), error, len(retry), len(quarantined),
    )  # fmt: skip
    return Failure(retry, quarantined, attempts)


def reopen_quarantined(session: Session, *, tenant: str, turn_ids: list[str]) -> int:
    """Open quarantined turns again (a replayed quarantine letter): pending, no attempts,
    no error. Returns how many."""
    result: Any = session.execute(_REOPEN, {"tenant": tenant, "ids": turn_ids})
    return int(result.rowcount or 0)


def merged(
    reports: Sequence[ConsolidationReport], *, deferred: Sequence[str]
) -> ConsolidationReport:
    """One report for several batches: counts and times summed, deferred turns joined."""
    totals: dict[str, Any] = {}
    for f in fields(ConsolidationReport):
        if f.name == "deferred":
            continue
        totals[f.name] = sum(getattr(r, f.name) for r in reports)
    joined = [t for r in reports for t in r.deferred] + list(deferred)
    return ConsolidationReport(**totals, deferred=tuple(dict.fromkeys(joined)))
