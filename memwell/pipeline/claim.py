"""Claim pending turns for consolidation, in batches.

A consolidate task claims its own turns first, then tops the batch up with other
pending turns of the same tenant (the task runs as that tenant under row-level
security, so it could not see another tenant's turns anyway). Under a backlog this
turns one-task-per-turn into batches of `limit` for the embedder, and the tasks
whose turns were taken become no-ops.
SKIP LOCKED lets several workers claim at once without waiting or double work.
"""

from __future__ import annotations

from sqlalchemy import case, select
from sqlalchemy.orm import Session

from memwell.db.models import Turn


def claim_pending(session: Session, *, tenant: str, turn_ids: list[str], limit: int) -> list[Turn]:
    """Lock up to `limit` pending turns (these first) until the transaction ends."""
    stmt = (
        select(Turn)
        .where(Turn.tenant == tenant, Turn.status == "pending")
        .order_by(case((Turn.id.in_(turn_ids), 0), else_=1), Turn.received_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return list(session.scalars(stmt).all())
