"""POST /v1/turns (batch enqueue), GET /v1/turns/{id} (consolidation status), and a
session's transcript: GET /v1/turns?user_id&session_id lists its turns, DELETE clears
them (all, or the `turn_id`s named)."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query, status
from pydantic import BaseModel, ConfigDict, Field

import api.convertors  # noqa: F401  (registers {name:id})
from api.deps import ReadTenantDep, StateDep, WriteTenantDep
from api.schemas import IdentifierPath, TurnBatch, TurnBatchAccepted, TurnStatus
from memwell.auth.size_limits import check_turns
from memwell.db.tenancy import async_tenant_session
from memwell.intake.turn_status import turn_progress
from memwell.intake.turns import Identifier, IngestPayload
from memwell.sessions.transcript import (
    MAX_TRANSCRIPT,
    Transcript,
    TranscriptCleared,
    clear_transcript,
    read_transcript,
)

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
    """pending, processed or failed once stored; dropped (with the reason) when it
    will never be stored; unknown while it may still be on its way."""
    async with async_tenant_session(state.sessions, tenant) as session:
        progress = await turn_progress(session, tenant=tenant, turn_id=turn_id)
    return TurnStatus.model_validate(asdict(progress))


class OfSession(BaseModel):
    """A closed model: a parameter the transcript does not know is refused (422)."""

    model_config = ConfigDict(extra="forbid")

    user_id: Identifier
    session_id: Identifier


class TranscriptQuery(OfSession):
    limit: int = Field(default=MAX_TRANSCRIPT, ge=1, le=MAX_TRANSCRIPT)


class ClearQuery(OfSession):
    turn_id: list[Identifier] | None = Field(
        default=None,
        max_length=MAX_TRANSCRIPT,
        description="Delete only these stored turns; unset: the whole session.",
    )


@router.get("", summary="A session's transcript: its turns, stored and buffered")
async def get_transcript(
    query: Annotated[TranscriptQuery, Query()], state: StateDep, tenant: ReadTenantDep
) -> Transcript:
    """Oldest first; the newest `limit` turns. Unknown sessions are empty, not 404:
    a chat history starts empty."""
    async with async_tenant_session(state.sessions, tenant) as session:
        return await read_transcript(
            session, buffer=state.chat.buffer, tenant=tenant, user_id=query.user_id,
            session_id=query.session_id, limit=query.limit,
        )  # fmt: skip


@router.delete("", summary="Clear a session's transcript (memories stay)")
async def delete_transcript(
    query: Annotated[ClearQuery, Query()], state: StateDep, tenant: WriteTenantDep
) -> TranscriptCleared:
    """The named turns (stored and buffered), or the whole session's turns, row and
    buffer. Turns acknowledged before the clear and still on their way are dropped when
    they arrive (status `dropped`), and the cleared ones read `dropped` too; turns sent
    after it are kept. Memories already consolidated from them stay:
    DELETE /v1/sessions/{id}?with_memories=true removes those too."""
    async with async_tenant_session(state.sessions, tenant) as session:
        return await clear_transcript(
            session, buffer=state.chat.buffer, tenant=tenant, user_id=query.user_id,
            session_id=query.session_id, turn_ids=query.turn_id or (),
        )  # fmt: skip
