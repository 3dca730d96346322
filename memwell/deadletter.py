"""Dead letters: tasks that failed for good, kept with their payload for replay."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from memwell.db.models import DeadLetter
from memwell.metrics import DEAD_LETTERS_TOTAL


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
