"""Read a turn's consolidation status (progress for clients and the demo)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession

from memwell.db.models import Turn
from memwell.intake.dropped_turns import dropped_reason

TurnState = Literal["pending", "processed", "failed", "dropped", "unknown"]


@dataclass(frozen=True)
class TurnProgress:
    """Where one turn stands. `dropped` is final, like `processed` and `failed`;
    `unknown` means not stored yet (it may still be on its way)."""

    id: str
    status: TurnState
    user_id: str | None = None
    session_id: str | None = None
    processed_at: datetime | None = None
    #: why a dropped turn was dropped ("user erased", "session cleared")
    reason: str | None = None


async def get_turn(session: AsyncSession, *, tenant: str, turn_id: str) -> Turn | None:
    return await session.get(Turn, (tenant, turn_id))


async def turn_progress(session: AsyncSession, *, tenant: str, turn_id: str) -> TurnProgress:
    """The stored turn's status; else `dropped` with its reason; else `unknown`."""
    turn = await get_turn(session, tenant=tenant, turn_id=turn_id)
    if turn is not None:
        return TurnProgress(
            id=turn.id, status=_state(turn.status), user_id=turn.user_id,
            session_id=turn.session_id, processed_at=turn.processed_at,
        )  # fmt: skip
    reason = await dropped_reason(session, tenant=tenant, turn_id=turn_id)
    if reason is not None:
        return TurnProgress(id=turn_id, status="dropped", reason=reason)
    # Unknown is an answer, not an error: the turn may still be in the queue.
    return TurnProgress(id=turn_id, status="unknown")


def _state(value: str) -> TurnState:
    known: tuple[TurnState, ...] = ("pending", "processed", "failed", "dropped")
    return next((s for s in known if s == value), "unknown")
