"""POST /v1/turns (batch enqueue) and GET /v1/turns/{id} (consolidation status)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, status

import api.convertors  # noqa: F401  (registers {name:id})
from api.deps import ReadTenantDep, StateDep, WriteTenantDep
from api.schemas import IdentifierPath, TurnBatch, TurnBatchAccepted, TurnStatus
from memwell.auth.size_limits import check_turns
from memwell.db.tenancy import async_tenant_session
from memwell.intake.turn_status import get_turn
from memwell.intake.turns import IngestPayload

router = APIRouter(prefix="/v1/turns", tags=["turns"])


@router.post("", status_code=status.HTTP_202_ACCEPTED)
async def post_turns(body: TurnBatch, state: StateDep, tenant: WriteTenantDep) -> TurnBatchAccepted:
    """202 only once the turns are in Postgres (the outbox): a broker loss after this
    answer cannot lose them, the sweeper re-dispatches."""
    check_turns(body.turns, state.settings)
    await asyncio.to_thread(state.accept, IngestPayload(tenant=tenant, turns=body.turns))
    ids = [t.id for t in body.turns]
    return TurnBatchAccepted(accepted=len(ids), turn_ids=ids)


# `:id` (api/convertors.py): turn ids may contain "/", which arrives decoded.
@router.get("/{turn_id:id}")
async def get_turn_status(
    turn_id: IdentifierPath, state: StateDep, tenant: ReadTenantDep
) -> TurnStatus:
    async with async_tenant_session(state.sessions, tenant) as session:
        turn = await get_turn(session, tenant=tenant, turn_id=turn_id)
    if turn is None:
        # Unknown is an answer, not an error: the turn may still be in the queue.
        return TurnStatus(id=turn_id, status="unknown")
    return TurnStatus(
        id=turn.id,
        status=turn.status,
        user_id=turn.user_id,
        session_id=turn.session_id,
        processed_at=turn.processed_at,
    )
