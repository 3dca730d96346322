"""Find turns stuck in `pending`: persisted, but their consolidate dispatch was lost."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memwell.db.models import Turn


def stale_pending_turns(
    session: Session, *, older_than: timedelta, limit: int
) -> dict[str, list[str]]:
    """Up to `limit` pending turns received longer ago than `older_than`, by tenant."""
    rows = session.execute(
        select(Turn.tenant, Turn.id)
        .where(Turn.status == "pending", Turn.received_at < func.now() - older_than)
        .order_by(Turn.received_at)
        .limit(limit)
    ).all()
    by_tenant: dict[str, list[str]] = defaultdict(list)
    for tenant, turn_id in rows:
        by_tenant[tenant].append(turn_id)
    return dict(by_tenant)
