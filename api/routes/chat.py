"""POST /v1/chat: a reply grounded in both memory tiers."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import StateDep, WriteTenantDep
from api.schemas import ChatRequest, ChatResponse
from memwell.auth.size_limits import check_message
from memwell.chat.service import chat

router = APIRouter(prefix="/v1", tags=["chat"])


@router.post("/chat")
async def post_chat(body: ChatRequest, state: StateDep, tenant: WriteTenantDep) -> ChatResponse:
    check_message(body.message, state.settings)
    result = await chat(
        state.chat,
        tenant=tenant,
        user_id=body.user_id,
        session_id=body.session_id,
        message=body.message,
    )
    return ChatResponse(
        reply=result.reply,
        model=result.model,
        memories=result.memories,
        turn_ids=result.turn_ids,
        timings_ms=result.timings_ms,
    )
