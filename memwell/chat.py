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

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memwell.buffer import BufferSnapshot, SessionBuffer
from memwell.context import assemble_context
from memwell.embeddings import CachedQueryEmbedder
from memwell.llm import ChatModel, ModelRequest
from memwell.retrieval import MemoryHit, SearchParams, search
from memwell.settings import Settings
from memwell.turns import IngestPayload, TurnIn, new_turn_id


@dataclass
class ChatDeps:
    """What the chat path needs; built once per API process."""

    settings: Settings
    sessions: async_sessionmaker[AsyncSession]
    buffer: SessionBuffer
    embedder: CachedQueryEmbedder
    model: ChatModel
    send: Callable[[IngestPayload], None]


@dataclass
class ChatResult:
    reply: str
    model: str
    memories: list[MemoryHit]
    turn_ids: list[str]
    timings_ms: dict[str, float] = field(default_factory=dict)


class _Stopwatch:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    def lap(self, name: str, started: float) -> float:
        now = time.perf_counter()
        self.timings[name] = round((now - started) * 1000, 3)
        return now


async def retrieve(
    deps: ChatDeps, *, tenant: str, user_id: str, query: str, watch: _Stopwatch | None = None
) -> list[MemoryHit]:
    """Embed the query (off the event loop: it is CPU work) and run the one SQL search."""
    start = time.perf_counter()
    vector = await asyncio.to_thread(deps.embedder.embed_query, query)
    if watch:
        start = watch.lap("embed", start)
    s = deps.settings
    params = SearchParams(
        tenant=tenant,
        user_id=user_id,
        query_vector=vector,
        embedding_model=deps.embedder.model_name,
        k=s.retrieval_top_k,
        similarity_floor=s.similarity_floor,
        w_relevance=s.weight_relevance,
        w_importance=s.weight_importance,
        w_recency=s.weight_recency,
        half_life_h=s.recency_half_life_h,
    )
    # The session runs as `memwell_app` for this tenant (row-level security).
    async with deps.sessions(info={"tenant": tenant}) as session:
        hits = await search(session, params)
    if watch:
        watch.lap("retrieve", start)
    return hits


async def chat(
    deps: ChatDeps, *, tenant: str, user_id: str, session_id: str, message: str
) -> ChatResult:
    """Answer one user message with both memory tiers, then remember the exchange."""
    watch = _Stopwatch()
    t0 = time.perf_counter()

    async def read_buffer() -> BufferSnapshot:
        started = time.perf_counter()
        snapshot = await deps.buffer.read(tenant, user_id, session_id)
        watch.lap("buffer", started)
        return snapshot

    snapshot, hits = await asyncio.gather(
        read_buffer(),
        retrieve(deps, tenant=tenant, user_id=user_id, query=message, watch=watch),
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
    await deps.buffer.append(
        tenant,
        user_id,
        session_id,
        [
            deps.buffer.make_turn(
                turn_id=t.id, role=t.role, content=t.content, created_at=now.isoformat()
            )
            for t in (user_turn, assistant_turn)
        ],
    )
    started = watch.lap("buffer_append", started)
    payload = IngestPayload(tenant=tenant, turns=[user_turn, assistant_turn])
    await asyncio.to_thread(deps.send, payload)
    watch.lap("enqueue", started)
    watch.lap("total", t0)
    return ChatResult(
        reply=reply.content,
        model=reply.model,
        memories=context.memories,
        turn_ids=[user_turn.id, assistant_turn.id],
        timings_ms=watch.timings,
    )
