"""Read a turn's consolidation status (progress for clients and the demo)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from memwell.db.models import Turn


async def get_turn(session: AsyncSession, *, tenant: str, turn_id: str) -> Turn | None:
    return await session.get(Turn, (tenant, turn_id))
