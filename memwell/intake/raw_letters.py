"""Dead letters of messages no worker could read: bounded in size and in number.

Such a message (worker/undecodable.py, worker/poison_items.py) is kept as its raw bytes
for the operator. Kept whole and without limit, one 100 MB item became a 140 MB row
and cost the worker 0.6 GB to write, a 200 MB one was too large for Postgres and was
lost, and a flood of 2,000 made 2,000 letters. So:

- a letter keeps the first `max_bytes` of the message (base64, under RAW_BYTES_KEY)
  and always records the whole size and SHA-256; a longer one says it was truncated,
  in its payload and in its error, so nothing is cut silently;
- at most `max_open` raw letters are open at once. Past it a new message is not stored
  but counted, in `dead_letters_not_kept` (what `memwell status` and `memwell dlq list`
  show) and in memwell_dead_letters_not_kept_total; `memwell dlq discard --raw` makes
  room. The count and the insert run under one advisory lock, so concurrent workers
  never pass the bound.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import delete, text
from sqlalchemy.orm import Session

from memwell.core.metrics import DEAD_LETTERS_NOT_KEPT_TOTAL
from memwell.db.models import DeadLetter, DeadLettersNotKept
from memwell.intake.dead_letters import RAW_BYTES_KEY, record_dead_letter

#: The row of `dead_letters_not_kept` that counts unreadable messages.
RAW_KIND: Final = "raw"

# The literal (not a parameter) matches ix_dead_letters_raw_open's predicate, so the
# count reads that index and never a payload.
_OPEN_RAW = text(
    """
    SELECT count(*) FROM (
        SELECT 1 FROM dead_letters
        WHERE replayed_at IS NULL AND payload ? 'unreadable_body_b64'
        LIMIT :bound
    ) AS open_raw
    """
)
_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended('memwell.raw_dead_letters', 0))")
_NOT_KEPT = text(
    """
    INSERT INTO dead_letters_not_kept (kind, count, last_error) VALUES (:kind, 1, :error)
    ON CONFLICT (kind) DO UPDATE
    SET count = dead_letters_not_kept.count + 1, last_at = now(), last_error = :error
    """
)


def raw_payload(raw: bytes, details: Mapping[str, str], *, max_bytes: int) -> dict[str, Any]:
    """The payload of a letter of `raw`: its first `max_bytes` (base64), its whole size
    and SHA-256, whether it was truncated, and what is known of it (`details`). Neither
    the hash nor the slice copies `raw`: a large item is held once."""
    view = memoryview(raw)
    return {
        RAW_BYTES_KEY: base64.b64encode(view[:max_bytes]).decode("ascii"),
        "size_bytes": len(raw),
        "sha256": hashlib.sha256(view).hexdigest(),
        "truncated": len(raw) > max_bytes,
        **details,
    }


def keep_raw_letter(
    session: Session,
    *,
    raw: bytes,
    task_name: str,
    error: str,
    details: Mapping[str, str],
    max_bytes: int,
    max_open: int,
) -> int | None:
    """Keep `raw` as a dead letter, truncated to `max_bytes`, unless `max_open` raw
    letters are open already: then count it as not kept. The letter's id, or None."""
    session.execute(_LOCK)
    if int(session.execute(_OPEN_RAW, {"bound": max_open}).scalar_one()) >= max_open:
        session.execute(_NOT_KEPT, {"kind": RAW_KIND, "error": f"{error} ({len(raw)} bytes)"})
        DEAD_LETTERS_NOT_KEPT_TOTAL.labels("bound").inc()
        return None
    payload = raw_payload(raw, details, max_bytes=max_bytes)
    if payload["truncated"]:
        error += (
            f"; truncated: the first {max_bytes} of {len(raw)} bytes kept "
            f"(sha256 {payload['sha256']})"
        )
    return record_dead_letter(session, task_name=task_name, payload=payload, error=error)


@dataclass(frozen=True)
class NotKept:
    """Unreadable messages not kept because the bound was reached."""

    count: int
    first_at: datetime
    last_at: datetime
    last_error: str


def raw_not_kept(session: Session) -> NotKept | None:
    """How many unreadable messages were not kept, since when; None when none."""
    row = session.get(DeadLettersNotKept, RAW_KIND)
    if row is None:
        return None
    return NotKept(
        count=row.count, first_at=row.first_at, last_at=row.last_at, last_error=row.last_error
    )


def discard_dead_letters(
    session: Session, *, ids: Sequence[int] = (), every_raw: bool = False
) -> list[int]:
    """Delete these open letters (any kind), or with `every_raw` every open raw one and
    the count of those not kept (the operator has seen them: room is made for new
    ones). Returns the deleted ids."""
    if not ids and not every_raw:
        return []
    stmt = delete(DeadLetter).where(DeadLetter.replayed_at.is_(None))
    if ids:
        stmt = stmt.where(DeadLetter.id.in_(list(ids)))
    if every_raw:
        stmt = stmt.where(DeadLetter.payload.has_key(RAW_BYTES_KEY))
        session.execute(delete(DeadLettersNotKept).where(DeadLettersNotKept.kind == RAW_KIND))
    return sorted(session.scalars(stmt.returning(DeadLetter.id)).all())


_COUNT_OPEN_RAW = text(
    "SELECT count(*) FROM dead_letters "
    "WHERE replayed_at IS NULL AND payload ? 'unreadable_body_b64'"
)


def open_raw_letters(session: Session) -> int:
    """How many raw letters are open (what the bound counts)."""
    return int(session.execute(_COUNT_OPEN_RAW).scalar_one())
