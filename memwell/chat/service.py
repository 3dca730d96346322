"""The thin chat path: buffer + retrieval concurrently, assemble, answer, remember.

Nothing expensive happens here besides the model call: consolidation (importance,
extraction, dedup, embedding of the new turns) is enqueued to the workers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

import numpy as np
import redis.asyncio as aioredis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memwell.buffer.session_buffer import BufferSnapshot, SessionBuffer
from memwell.chat.assembly import assemble_context
from memwell.core import inflight
from memwell.core.background import spawn
from memwell.core.logs import current_request_id
from memwell.core.metrics import observe_chat_timings, record_llm_call
from memwell.core.settings import Settings
from memwell.db.read_pool import TenantReadPool
from memwell.embeddings import CachedQueryEmbedder
from memwell.intake.turns import IngestPayload, TurnIn, new_turn_id
from memwell.llm import ChatModel, ModelRequest
from memwell.retrieval.access import record_access_in_background
from memwell.retrieval.ann import AnnRegistry
from memwell.retrieval.search import (
    MemoryHit,
    Overrides,
    SearchFilters,
    params_from_settings,
    search_pooled,
)

T = TypeVar("T")


@dataclass
class ChatDeps:
    """What the chat path needs; built once per API process."""

    settings: Settings
    sessions: async_sessionmaker[AsyncSession]
    #: retrieval's reads: one round trip per search (memwell/db/read_pool.py)
    reads: TenantReadPool
    buffer: SessionBuffer
    embedder: CachedQueryEmbedder
    model: ChatModel
    send: Callable[[IngestPayload], None]
    #: (tenant, user_id, session_id, evicted turn ids): feeds the running summary
    summarize: Callable[[str, str, str, list[str]], None] | None = None
    ann: AnnRegistry = field(default_factory=AnnRegistry)
    # None: hits are not marked accessed (benchmarks, replays).
    access: aioredis.Redis | None = None
    #: the query embedder is local CPU work, not a network call (see `_embed_query`)
    local_embedder: bool = False


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

    async def timed(self, name: str, work: Awaitable[T]) -> T:
        started = time.perf_counter()
        result = await work
        self.lap(name, started)
        return result

    def lap(self, name: str, started: float) -> float:
        now = time.perf_counter()
        self.timings[name] = round((now - started) * 1000, 3)
        return now


async def _embed_query(deps: ChatDeps, query: str) -> np.ndarray:
    """The query's vector: a local model embeds on the loop's own thread when this is
    the only request being served; otherwise (other requests to serve, or an embedding
    endpoint to wait for) a worker thread does.

    Why not always a thread: the hand-off puts the model on the other core, whose caches
    hold none of it (local int8, after a search: 1.3 ms inline, 1.8 ms via a thread).
    """
    if deps.local_embedder and inflight.alone():
        return deps.embedder.embed_query(query)
    return await asyncio.to_thread(deps.embedder.embed_query, query)


async def retrieve(
    deps: ChatDeps,
    *,
    tenant: str,
    user_id: str,
    query: str,
    k: int | None = None,
    filters: SearchFilters | None = None,
    as_of: datetime | None = None,
    overrides: Overrides | None = None,
    watch: _Stopwatch | None = None,
) -> list[MemoryHit]:
    """Embed the query (off the event loop: it is CPU work) and run the one SQL search.

    The only retrieval path: chat, search and context all come through here. Hits are
    marked accessed in the background; the caller never waits for that write.
    """
    start = time.perf_counter()
    # No connection is held while the query waits for, and runs on, the CPU: under load
    # (200 clients) requests holding one while queued for the embedder emptied the pool.
    vector = await _embed_query(deps, query)
    if watch:
        start = watch.lap("embed", start)
    model = deps.embedder.model_name
    # Both reads run as `memwell_app` for this tenant (row-level security).
    ann_dims = await deps.ann.dims_for(deps.reads, tenant, user_id, model)
    params = params_from_settings(
        deps.settings,
        tenant=tenant,
        user_id=user_id,
        query_vector=vector,
        embedding_model=model,
        query_text=query,
        k=k,
        filters=filters,
        as_of=as_of,
        overrides=overrides,
        ann_dims=ann_dims,
    )
    hits = await search_pooled(deps.reads, params)
    if watch:
        watch.lap("retrieve", start)
    if deps.access is not None and as_of is None:
        record_access_in_background(deps.access, tenant=tenant, ids=[h.id for h in hits])
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
        # derived data, which close-idle rebuilds from the stored turns anyway, and the
        # reply had waited ~0.9 ms for it on one exchange in ten.
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
