"""POST /v1/chat: a reply grounded in both memory tiers, whole or streamed."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing

from fastapi import APIRouter

from api.deps import StateDep, WriteTenantDep
from api.errors import problem_body
from api.redaction import log_error
from api.schemas import ChatRequest, ChatResponse
from api.sse import EventStream, frame
from memwell.auth.size_limits import check_message
from memwell.chat.service import chat
from memwell.chat.stream import (
    ChatEvent,
    DoneEvent,
    ErrorEvent,
    MemoriesEvent,
    TokenEvent,
    chat_stream,
)

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1", tags=["chat"])

STREAM_RESPONSE = {
    "description": "The reply as one JSON; with `stream: true`, Server-Sent Events: "
    '`memories` (the memories used), then `token` events ({"delta": text}), then `done` '
    '({"turn_ids", "model", "timings_ms"}), or `error` (a problem, with the `turn_ids` of '
    "what was remembered).",
    # One event, described as FastAPI describes its own streams (OpenAPI 3.2 `itemSchema`).
    "content": {
        "text/event-stream": {
            "itemSchema": {
                "type": "object",
                "required": ["event", "data"],
                "properties": {
                    "event": {"type": "string", "enum": ["memories", "token", "done", "error"]},
                    "data": {"type": "string", "contentMediaType": "application/json"},
                },
            }
        }
    },
}


@router.post("/chat", response_model=ChatResponse, responses={200: STREAM_RESPONSE})
async def post_chat(
    body: ChatRequest, state: StateDep, tenant: WriteTenantDep
) -> ChatResponse | EventStream:
    check_message(body.message, state.settings)
    if body.stream:
        events = chat_stream(
            state.chat,
            tenant=tenant,
            user_id=body.user_id,
            session_id=body.session_id,
            message=body.message,
        )
        # The reads and the retrieval run before the first byte: their failures
        # answer with their own status, as they do without streaming.
        first = await anext(events)
        return EventStream(_frames(first, events))
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


async def _frames(
    first: ChatEvent, events: AsyncGenerator[ChatEvent, None]
) -> AsyncGenerator[bytes, None]:
    async with aclosing(events):
        try:
            yield _frame(first)
            async for event in events:
                yield _frame(event)
        except Exception as exc:  # the status line is sent: the failure goes as an event
            log_error(log, "a chat stream failed", exc)
            yield frame("error", problem_body(exc))


def _frame(event: ChatEvent) -> bytes:
    match event:
        case MemoriesEvent(memories=memories):
            return frame("memories", memories)
        case TokenEvent(delta=delta):
            return frame("token", {"delta": delta})
        case DoneEvent():
            return frame(
                "done",
                {"turn_ids": event.turn_ids, "model": event.model, "timings_ms": event.timings_ms},
            )
        case ErrorEvent(error=error, turn_ids=turn_ids):
            return frame("error", {**problem_body(error), "turn_ids": turn_ids})
