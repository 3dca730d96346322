"""Ready-to-use context for apps that call their own model (POST /v1/context).

The same reads as the chat path, run concurrently: the session buffer (summary and
recent turns) and the one retrieval query, plus the session's newest stored turns, so
turns that never passed through the buffer (POST /v1/turns, `enqueue_turns`, a Redis
restart) are recent too (memwell/chat/stored_turns.py). Then the same assembly:
memories are quoted data inside the system message, and the token budget trims
memories first, then the oldest recent turns.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memwell.buffer.session_buffer import BufferedTurn, BufferSnapshot, SessionBuffer
from memwell.chat.assembly import assemble_context, render_data_block
from memwell.chat.stored_turns import merge_recent, newest_stored_turns
from memwell.retrieval.search import MemoryHit, Overrides, SearchFilters
from memwell.retrieval.service import RetrievalDeps, retrieve


@dataclass(frozen=True)
class ContextResult:
    messages: list[dict[str, str]]
    data_block: str  # memories + summary, quoted, for callers who build their own prompt
    memories: list[MemoryHit]
    summary: str | None
    recent: list[BufferedTurn]
    tokens: int
    budget: int


async def build_context(
    retrieval: RetrievalDeps,
    buffer: SessionBuffer,
    sessions: async_sessionmaker[AsyncSession],
    *,
    tenant: str,
    user_id: str,
    query: str,
    session_id: str | None = None,
    budget: int | None = None,
    k: int | None = None,
    filters: SearchFilters | None = None,
    as_of: datetime | None = None,
    overrides: Overrides | None = None,
    system_prompt: str | None = None,
) -> ContextResult:
    """Memories, session summary and recent turns for `query`, inside `budget` tokens.
    Without a session, only memories. `sessions` are tenant-scoped (row-level
    security): they read the session's stored turns."""
    searching = retrieve(
        retrieval, tenant=tenant, user_id=user_id, query=query, k=k, filters=filters,
        as_of=as_of, overrides=overrides,
    )  # fmt: skip
    if session_id is None:
        hits, snapshot = await searching, BufferSnapshot(turns=[], total_tokens=0, summary=None)
        recent: list[BufferedTurn] = []
    else:
        snapshot, hits, stored = await asyncio.gather(
            buffer.read(tenant, user_id, session_id),
            searching,
            newest_stored_turns(sessions, tenant=tenant, user_id=user_id, session_id=session_id),
        )
        recent = merge_recent(snapshot, stored)
    resolved_budget = budget or retrieval.settings.context_token_budget
    extra = {"system_prompt": system_prompt} if system_prompt else {}
    context = assemble_context(
        message=query,
        memories=hits,
        summary=snapshot.summary,
        recent=recent,
        budget=resolved_budget,
        **extra,
    )
    return ContextResult(
        messages=context.messages,
        data_block=render_data_block(context.memories, snapshot.summary),
        memories=context.memories,
        summary=snapshot.summary,
        recent=context.recent,
        tokens=context.tokens,
        budget=resolved_budget,
    )
