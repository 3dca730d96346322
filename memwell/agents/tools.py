"""The four memory operations agents use (remember, recall, forget, get_context), as
plain async functions over explicit dependencies.

The MCP server (memwell/agents/mcp_server.py) is a thin skin over these, and they call the
same service functions as REST: enqueue_turns for remember, the one SQL search for
recall, assemble_context for get_context. The search is bound once, here, in
`SEARCH`: when the REST search service grows (filters, hybrid ranking), pointing
`SEARCH` at it is the only change.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memwell.buffer.session_buffer import SessionBuffer
from memwell.chat.assembly import assemble_context, render_data_block
from memwell.core.errors import InvalidInput, NotFound
from memwell.core.settings import Settings
from memwell.db.models import Memory
from memwell.embeddings import CachedQueryEmbedder
from memwell.intake.enqueue import enqueue_turns
from memwell.intake.turns import TurnIn
from memwell.memories.service import delete_memory
from memwell.retrieval.search import MemoryHit, SearchParams, search

#: The retrieval service both skins share (swap here for the richer search service).
SEARCH: Callable[[AsyncSession, SearchParams], Awaitable[list[MemoryHit]]] = search


@dataclass
class ToolDeps:
    settings: Settings
    tenant: str
    sessions: async_sessionmaker[AsyncSession]
    embedder: CachedQueryEmbedder
    buffer: SessionBuffer
    broker_url: str


class Remembered(BaseModel):
    turn_id: str
    status: str = Field(description="queued: consolidation runs in the background")


class RecalledMemory(BaseModel):
    id: str
    kind: str
    content: str
    score: float
    relevance: float
    importance: float
    recency: float
    created_at: datetime
    session_id: str | None
    source_turn_ids: list[str]

    @classmethod
    def from_hit(cls, hit: MemoryHit) -> RecalledMemory:
        fields = {name: getattr(hit, name) for name in cls.model_fields if name != "id"}
        return cls(id=str(hit.id), **fields)


class Recall(BaseModel):
    memories: list[RecalledMemory]


class Forgotten(BaseModel):
    memory_id: str
    forgotten: bool


class Context(BaseModel):
    messages: list[dict[str, str]] = Field(description="OpenAI-style messages, ready to send")
    data_block: str = Field(description="The memories and summary, quoted as data")
    memories: list[RecalledMemory]
    tokens: int


async def remember(
    deps: ToolDeps,
    *,
    user_id: str,
    content: str,
    session_id: str,
    role: str = "user",
    turn_id: str | None = None,
    created_at: datetime | None = None,
) -> Remembered:
    """Enqueue one turn for consolidation (the same path as POST /v1/turns)."""
    fields: dict[str, Any] = {
        "user_id": user_id,
        "session_id": session_id,
        "content": content,
        "role": role,
        "created_at": created_at,
    }
    if turn_id:
        fields["id"] = turn_id
    turn = TurnIn.model_validate(fields)
    ids = await asyncio.to_thread(
        enqueue_turns, [turn], tenant=deps.tenant, broker_url=deps.broker_url
    )
    return Remembered(turn_id=ids[0], status="queued")


async def recall(deps: ToolDeps, *, user_id: str, query: str, k: int | None = None) -> Recall:
    """The user's memories most relevant to `query`, best first, with score parts."""
    hits = await _search(deps, user_id=user_id, query=query, k=k)
    return Recall(memories=[RecalledMemory.from_hit(h) for h in hits])


async def _search(deps: ToolDeps, *, user_id: str, query: str, k: int | None) -> list[MemoryHit]:
    if not query.strip():
        raise InvalidInput("query must not be blank")
    s = deps.settings
    vector = await asyncio.to_thread(deps.embedder.embed_query, query)
    params = SearchParams(
        tenant=deps.tenant,
        user_id=user_id,
        query_vector=vector,
        embedding_model=deps.embedder.model_name,
        k=max(1, min(k or s.retrieval_top_k, 100)),
        similarity_floor=s.similarity_floor,
        w_relevance=s.weight_relevance,
        w_importance=s.weight_importance,
        w_recency=s.weight_recency,
        half_life_h=s.recency_half_life_h,
    )
    async with deps.sessions() as session:
        return await SEARCH(session, params)


async def forget(deps: ToolDeps, *, user_id: str, memory_id: str) -> Forgotten:
    """Delete one of the user's memories, as DELETE /v1/memories/{id} does: tombstone,
    text removed, history kept with its content redacted."""
    try:
        key = uuid.UUID(memory_id)
    except ValueError as exc:
        raise InvalidInput(f"not a memory id: {memory_id!r}") from exc
    async with deps.sessions.begin() as session:
        owner = await session.scalar(
            select(Memory.user_id).where(
                Memory.tenant == deps.tenant, Memory.id == key, Memory.deleted_at.is_(None)
            )
        )
        if owner != user_id:
            raise NotFound(f"no live memory {memory_id} for this user")
        # The same deletion as REST: tombstone, text removed, history redacted.
        await delete_memory(
            session, tenant=deps.tenant, memory_id=key, reason="forgotten by an agent (MCP forget)"
        )
    return Forgotten(memory_id=memory_id, forgotten=True)


async def get_context(
    deps: ToolDeps, *, user_id: str, query: str, session_id: str | None = None
) -> Context:
    """Context for the agent's next model call: memories as quoted data, the session's
    summary and recent turns, inside the context token budget."""
    searching = _search(deps, user_id=user_id, query=query, k=None)
    if session_id:
        snapshot, hits = await asyncio.gather(
            deps.buffer.read(deps.tenant, user_id, session_id), searching
        )
        summary, recent = snapshot.summary, snapshot.turns
    else:
        hits, summary, recent = await searching, None, []
    assembled = assemble_context(
        message=query,
        memories=hits,
        summary=summary,
        recent=recent,
        budget=deps.settings.context_token_budget,
    )
    return Context(
        messages=assembled.messages,
        data_block=render_data_block(assembled.memories, summary),
        memories=[RecalledMemory.from_hit(h) for h in assembled.memories],
        tokens=assembled.tokens,
    )
