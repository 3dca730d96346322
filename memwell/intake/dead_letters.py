"""Dead letters: tasks that failed for good, kept with their payload for replay
(`memwell dlq list` / `memwell dlq replay`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memwell.core.metrics import DEAD_LETTERS_TOTAL
from memwell.db.models import DeadLetter


def record_dead_letter(
    session: Session,
    *,
    task_name: str,
    payload: dict[str, Any],
    error: str,
    tenant: str | None = None,
    attempts: int = 1,
) -> int:
    """Store one dead letter and return its id."""
    letter = DeadLetter(
        task_name=task_name,
        tenant=tenant,
        payload=payload,
        error=error[:4000],
        attempts=attempts,
    )
    session.add(letter)
    session.flush()
    DEAD_LETTERS_TOTAL.labels(task_name).inc()
    return letter.id


def list_dead_letters(
    session: Session, *, include_replayed: bool = False, limit: int = 50
) -> list[DeadLetter]:
    """The newest dead letters (open ones only, unless asked)."""
    stmt = select(DeadLetter).order_by(DeadLetter.id.desc()).limit(limit)
    if not include_replayed:
        stmt = stmt.where(DeadLetter.replayed_at.is_(None))
    return list(session.scalars(stmt).all())


def replay_dead_letters(
    session: Session,
    send: Callable[[str, dict[str, Any]], None],
    *,
    ids: Sequence[int] | None = None,
    limit: int = 100,
) -> list[int]:
    """Re-send open dead letters (these ids, or the oldest `limit`) with their original
    task name and arguments, and mark them replayed. Tasks are idempotent, so a replay
    of work that did land is harmless. Returns the replayed ids."""
    stmt = (
        select(DeadLetter)
        .where(DeadLetter.replayed_at.is_(None))
        .order_by(DeadLetter.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    if ids is not None:
        stmt = stmt.where(DeadLetter.id.in_(list(ids)))
    letters = list(session.scalars(stmt).all())
    for letter in letters:
        send(letter.task_name, dict(letter.payload))
        letter.replayed_at = datetime.now(UTC)
    session.flush()
    return [letter.id for letter in letters]
