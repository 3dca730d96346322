"""Dead letters: tasks that failed for good, kept with their payload for replay
(`memwell dlq list` / `memwell dlq replay`), and messages no worker could read as a
task, kept as their raw bytes for the operator (not replayable: they hold no task's
arguments to re-send; bounded in size and number, memwell/intake/raw_letters.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from memwell.core.metrics import DEAD_LETTERS_TOTAL
from memwell.db.models import DeadLetter

#: The payload key of a letter kept as raw bytes (base64): a message no worker could read.
RAW_BYTES_KEY = "unreadable_body_b64"


def storable(value: Any) -> Any:
    """`value` with what Postgres text and jsonb refuse escaped, not dropped: a NUL
    becomes the six characters \\u0000, a lone surrogate its \\udXXX escape. A poison
    payload is kept whole for the operator, whatever it holds."""
    if isinstance(value, str):
        escaped = value.replace("\x00", "\\u0000")
        return escaped.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


def validation_summary(exc: ValidationError) -> str:
    """Where and why a payload failed, never its values: they are a user's text and
    must not reach logs or an error column in clear."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
        for e in exc.errors(include_input=False, include_url=False)
    )


def turn_ids_of(payload: Any) -> list[str]:
    """The turn ids a dead letter's payload carries (ingest: its turns; consolidate:
    its turn_ids), whatever shape a poison payload has."""
    if not isinstance(payload, dict):
        return []
    ids = payload.get("turn_ids")
    turns = (
        (payload.get("payload") or {}).get("turns")
        if isinstance(payload.get("payload"), dict)
        else None
    )
    if isinstance(turns, list):
        ids = [t.get("id") for t in turns if isinstance(t, dict)]
    return [str(i) for i in ids or [] if isinstance(i, str | int)]


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
        tenant=storable(tenant),
        payload=storable(payload),
        error=storable(error[:4000]),
        attempts=attempts,
    )
    session.add(letter)
    session.flush()
    DEAD_LETTERS_TOTAL.labels(task_name).inc()
    return letter.id


def replayable(payload: Any) -> bool:
    """Whether a letter's payload is a task's arguments, which a replay can re-send; raw
    bytes are not: re-sending them would only make another dead letter."""
    return not (isinstance(payload, dict) and RAW_BYTES_KEY in payload)


def list_dead_letters(
    session: Session,
    *,
    include_replayed: bool = False,
    limit: int = 50,
    tenant: str | None = None,
) -> list[DeadLetter]:
    """The newest dead letters (open ones only, unless asked); with `tenant`, only
    that tenant's."""
    stmt = select(DeadLetter).order_by(DeadLetter.id.desc()).limit(limit)
    if not include_replayed:
        stmt = stmt.where(DeadLetter.replayed_at.is_(None))
    if tenant is not None:
        stmt = stmt.where(DeadLetter.tenant == tenant)
    return list(session.scalars(stmt).all())


def replay_dead_letters(
    session: Session,
    send: Callable[[str, dict[str, Any]], None],
    *,
    ids: Sequence[int] | None = None,
    limit: int = 100,
    tenant: str | None = None,
) -> list[int]:
    """Re-send open dead letters (these ids, or the oldest `limit`; with `tenant`, only
    that tenant's) with their original task name and arguments, and mark them
    replayed. Tasks are idempotent, so a replay of work that did land is harmless.
    Letters kept as raw bytes are skipped (see `replayable`). Returns the replayed ids."""
    stmt = (
        select(DeadLetter)
        .where(DeadLetter.replayed_at.is_(None), ~DeadLetter.payload.has_key(RAW_BYTES_KEY))
        .order_by(DeadLetter.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    if ids is not None:
        stmt = stmt.where(DeadLetter.id.in_(list(ids)))
    if tenant is not None:
        stmt = stmt.where(DeadLetter.tenant == tenant)
    letters = list(session.scalars(stmt).all())
    for letter in letters:
        send(letter.task_name, dict(letter.payload))
        letter.replayed_at = datetime.now(UTC)
    session.flush()
    return [letter.id for letter in letters]
