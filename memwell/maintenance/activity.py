"""How fast consolidation writes memory, minute by minute, over the last minutes.

Read from the newest memory events by primary key, so the cost is bounded by
`RECENT_EVENTS` however large the history grows (the events table has no index on
its time). A busier window than that shows as capped rather than costing a scan.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memwell.db.models import MemoryEvent

RECENT_EVENTS: Final = 20_000
#: the events consolidation writes; decay, update, delete and redact are not its work
CONSOLIDATION_EVENTS: Final = ("add", "reinforce", "merge", "supersede")


@dataclass(frozen=True)
class MinuteCount:
    minute: datetime
    events: int


@dataclass(frozen=True)
class ConsolidationRate:
    """Memory events per minute, oldest minute first, zeros included."""

    minutes: list[MinuteCount]
    #: the window held more events than were read: the counts are a lower bound
    capped: bool

    @property
    def peak(self) -> int:
        return max((m.events for m in self.minutes), default=0)


async def consolidation_rate(
    session: AsyncSession, *, now: datetime, minutes: int = 15
) -> ConsolidationRate:
    """Add, reinforce, merge and supersede events per minute over the last `minutes`."""
    start = (now.astimezone(UTC) - timedelta(minutes=minutes - 1)).replace(second=0, microsecond=0)
    recent = (
        select(MemoryEvent.created_at, MemoryEvent.event)
        .order_by(MemoryEvent.id.desc())
        .limit(RECENT_EVENTS)
        .subquery()
    )
    minute = func.date_trunc("minute", recent.c.created_at)
    rows = await session.execute(
        select(minute, func.count())
        .where(recent.c.created_at >= start, recent.c.event.in_(CONSOLIDATION_EVENTS))
        .group_by(minute)
    )
    counts = {at.astimezone(UTC): int(n) for at, n in rows.all()}
    read, oldest = (
        await session.execute(select(func.count(), func.min(recent.c.created_at)))
    ).one()
    capped = int(read or 0) >= RECENT_EVENTS and oldest is not None and oldest >= start
    series = [
        MinuteCount(minute=at, events=counts.get(at, 0))
        for at in (start + timedelta(minutes=i) for i in range(minutes))
    ]
    return ConsolidationRate(minutes=series, capped=capped)
