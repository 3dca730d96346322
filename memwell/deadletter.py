"""Dead letters: tasks that failed for good, kept with their payload for replay."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

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
    return letter.id
