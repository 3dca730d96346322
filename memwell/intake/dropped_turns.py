"""Turns that were acknowledged but will never be stored, and why.

A turn is dropped on its way in when its user was erased before it landed (the ingest
step finds the tombstone and its event time is not after the erasure) or when its
session was cleared while it was still in flight (the clear records the session's
acknowledged, unstored turns here before it commits, memwell/sessions/fence.py). A
clear records the stored turns it deletes too, so a cleared turn is `dropped` however
far it had got: a resend of it stays dropped, and a summary request that names it
settles instead of waiting for a turn that will never be stored. The
ingest step drops a turn recorded here, under the per-user lock that clears and
erasures take exclusively, so a turn either lands before the clear (and the clear
deletes it) or is dropped: the clear's fence is the acknowledgement it found, not a
comparison of clocks.

Each record is a tenant, an HMAC of the turn id (memwell/memories/tombstones.py), a
short reason and a time: no user id and no content, so a dropped turn of an erased
user leaves nothing readable of them. It is what a turn's status reports as
`dropped`, and a resend of the same turn id stays dropped, as a resend of a stored one
stays stored.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from memwell.db.models import DroppedTurn
from memwell.memories.tombstones import turn_hash

USER_ERASED: Final = "user erased"
SESSION_CLEARED: Final = "session cleared"


# One array parameter, however many turns: a clear of a long session names thousands,
# and a row of parameters each would pass the protocol's 65,535.
_RECORD = text(
    """
    INSERT INTO dropped_turns (tenant, turn_hash, reason)
    SELECT :tenant, h, :reason FROM unnest(CAST(:hashes AS text[])) AS h
    ON CONFLICT (tenant, turn_hash) DO NOTHING
    """
)


def record_dropped(session: Session, *, tenant: str, turn_ids: Iterable[str], reason: str) -> None:
    """Record these turns as dropped (the first reason recorded stays)."""
    hashes = [turn_hash(tenant, t) for t in sorted(set(turn_ids))]
    if hashes:
        session.execute(_RECORD, {"tenant": tenant, "hashes": hashes, "reason": reason})


def dropped_among(session: Session, *, tenant: str, turn_ids: Iterable[str]) -> set[str]:
    """Those of `turn_ids` recorded as dropped."""
    by_hash = {turn_hash(tenant, t): t for t in turn_ids}
    if not by_hash:
        return set()
    found = session.scalars(
        select(DroppedTurn.turn_hash).where(
            DroppedTurn.tenant == tenant, DroppedTurn.turn_hash.in_(by_hash)
        )
    )
    return {by_hash[h] for h in found}


async def dropped_reason(session: AsyncSession, *, tenant: str, turn_id: str) -> str | None:
    """Why the turn was dropped, or None when it was not."""
    row = await session.get(DroppedTurn, (tenant, turn_hash(tenant, turn_id)))
    return None if row is None else row.reason
