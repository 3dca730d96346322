"""Claim pending turns for consolidation, in micro-batches.

A consolidate task claims its own turns first, then tops the batch up with other
pending turns of the same tenant (the task runs as that tenant under row-level
security, so it could not see another tenant's turns anyway). Under a backlog this
turns one-task-per-turn into batches of `limit` for the embedder, and the tasks
whose turns were taken become no-ops.
SKIP LOCKED lets several workers claim at once without waiting or double work.

When the first claim comes back short, `claim_batch` lingers up to `linger_s`,
topping up as turns land, so a turn that arrives just ahead of others (their ingest
tasks still in flight) is not embedded at batch 1: the batch flushes at `limit`
turns or after `linger_s`, whichever comes first. A turn alone pays the linger once.
"""

from __future__ import annotations

import time
from collections.abc import Collection

from sqlalchemy import and_, case, select, tuple_
from sqlalchemy.orm import Session

from memwell.db.models import Turn

LINGER_POLL_S = 0.005


def claim_pending(
    session: Session,
    *,
    tenant: str,
    turn_ids: list[str],
    limit: int,
    exclude: Collection[tuple[str, str]] = (),
) -> list[Turn]:
    """Lock up to `limit` pending turns (these first) until the transaction ends."""
    mine = and_(Turn.tenant == tenant, Turn.id.in_(turn_ids))
    stmt = select(Turn).where(Turn.tenant == tenant, Turn.status == "pending")
    if exclude:
        stmt = stmt.where(tuple_(Turn.tenant, Turn.id).not_in(list(exclude)))
    stmt = (
        stmt.order_by(case((mine, 0), else_=1), Turn.received_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return list(session.scalars(stmt).all())


def claim_batch(
    session: Session, *, tenant: str, turn_ids: list[str], limit: int, linger_s: float
) -> list[Turn]:
    """claim_pending, then top up until `limit` turns or `linger_s` has passed."""
    turns = claim_pending(session, tenant=tenant, turn_ids=turn_ids, limit=limit)
    if not turns or linger_s <= 0:
        return turns
    deadline = time.monotonic() + linger_s
    while len(turns) < limit and time.monotonic() < deadline:
        time.sleep(LINGER_POLL_S)
        turns += claim_pending(
            session,
            tenant=tenant,
            turn_ids=[],
            limit=limit - len(turns),
            exclude={(t.tenant, t.id) for t in turns},
        )
    return turns
