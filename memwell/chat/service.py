"""The thin chat path: buffer + retrieval concurrently, assemble, answer, remember.

Nothing expensive happens here besides the model call: consolidation (importance,
extraction, dedup, embedding of the new turns) is enqueued to the workers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from memwell.buffer.session_buffer import BufferSnapshot, SessionBuffer
from memwell.chat.assembly import assemble_context
from memwell.core.background import spawn
from memwell.core.logs import current_request_id
from memwell.core.metrics import observe_chat_timings, record_llm_call
from memwell.core.settings import Settings
from memwell.core.timing import Stopwatch
from memwell.intake.turns import IngestPayload, TurnIn, new_turn_id
from memwell.llm import ChatModel, ModelRequest
from memwell.retrieval.search import MemoryHit
from memwell.retrieval.service import RetrievalDeps, retrieve


@dataclass
class ChatDeps:
    """What the chat path needs; built once per API process."""

    settings: Settings
    retrieval: RetrievalDeps
    buffer: SessionBuffer
    model: ChatModel
    send: Callable[[IngestPayload], None]
    #: (tenant, user_id, session_id, evicted turn ids): feeds the running summary
    summarize: Callable[[str, str, str, list[str]], None] | None = None


@dataclass
class ChatResult:
    reply: str
    model: str
    memories: list[MemoryHit]
    turn_ids: list[str]
    timings_ms: dict[str, float] = field(default_factory=dict)


async def chat(
    deps: ChatDeps, *, tenant: str, user_id: str, session_id: str, message: str
) -> ChatResult:
    """Answer one user message with both memory tiers, then remember the exchange."""
    watch = Stopwatch()
    t0 = time.perf_counter()

    async def read_buffer() -> BufferSnapshot:
        started = time.perf_counter()
        snapshot = await deps.buffer.read(tenant, user_id, session_id)
        watch.lap("buffer", started)
        return snapshot

    snapshot, hits = await asyncio.gather(
        read_buffer(),
        retrieve(deps.retrieval, tenant=tenant, user_id=user_id, query=message, watch=watch),
    )
    started = time.perf_counter()
    context = assemble_context(
        message=message,
        memories=hits,
        summary=snapshot.summary,
        recent=snapshot.turns,
        budget=deps.settings.context_token_budget,
    )
    started = watch.lap("assemble", started)
    reply = await deps.model.complete(
        ModelRequest(messages=context.messages, memories=context.memories)
    )
    started = watch.lap("model", started)
    if deps.settings.llm_mode:
        record_llm_call(
            stage="chat",
            tenant=tenant,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
        )

    now = datetime.now(UTC)
    user_turn = TurnIn(
        id=new_turn_id(),
        user_id=user_id,
        session_id=session_id,
        role="user",
        content=message,
        created_at=now,
    )
    assistant_turn = TurnIn(
        id=new_turn_id(),
        user_id=user_id,
        session_id=session_id,
        role="assistant",
        content=reply.content or "(empty reply)",
        created_at=now,
    )
    payload = IngestPayload(
        tenant=tenant, turns=[user_turn, assistant_turn], request_id=current_request_id()
    )
    buffered = [
        deps.buffer.make_turn(
            turn_id=t.id, role=t.role, content=t.content, created_at=now.isoformat()
        )
        for t in (user_turn, assistant_turn)
    ]
    # Two independent writes, each its own round trip: neither waits for the other.
    evicted, _ = await asyncio.gather(
        watch.timed("buffer_append", deps.buffer.append(tenant, user_id, session_id, buffered)),
        watch.timed("enqueue", asyncio.to_thread(deps.send, payload)),
    )
    if evicted and deps.summarize is not None:
        # After the ingest of this exchange (the worker retries until the evicted turns
        # are stored, so the order only saves a retry), and not awaited: the summary is
        # derived data, which close-idle rebuilds from the stored turns anyway, so the
        # reply does not wait for it.
        ids = [t.turn_id for t in evicted]
        spawn(
            asyncio.to_thread(deps.summarize, tenant, user_id, session_id, ids),
            what=f"the summary request for {len(ids)} evicted turns",
        )
    watch.lap("total", t0)
    observe_chat_timings(watch.timings)
    return ChatResult(
        reply=reply.content,
        model=reply.model,
        memories=context.memories,
        turn_ids=[user_turn.id, assistant_turn.id],
        timings_ms=watch.timings,
    )
