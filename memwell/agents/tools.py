"""The memory operations agents use (remember, recall, forget, get_context,
get_profile), as plain async functions over explicit dependencies.

The MCP server (memwell/agents/mcp_server.py) is a thin skin over these, and these are
thin skins over the same services REST calls: `enqueue_turns` for remember,
`retrieve` for recall, `build_context` for get_context, `delete_memory` for forget,
`users.profile.get_profile` for get_profile.
So an agent ranks, filters and fails exactly as a REST client does.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memwell.auth.size_limits import check_memories, check_turns
from memwell.buffer.session_buffer import SessionBuffer
from memwell.chat.context import build_context
from memwell.core.errors import InvalidInput
from memwell.core.settings import Settings
from memwell.db.recent_writes import note_write
from memwell.db.tenancy import async_tenant_session
from memwell.embeddings.base import Embedder
from memwell.intake.enqueue import enqueue_turns
from memwell.intake.turns import Query, TurnIn, first_reason
from memwell.memories.add import AddedMemory, NewMemory, add_memories
from memwell.memories.edit import EditResult, MemoryPatch
from memwell.memories.edit import update_memory as edit_memory
from memwell.memories.service import delete_memory
from memwell.pipeline.reconcile import ReconcilePolicy
from memwell.retrieval.search import MemoryHit
from memwell.retrieval.service import RetrievalDeps, retrieve
from memwell.users.profile import DEFAULT_ENTITIES, DEFAULT_RELATIONS, UserProfile
from memwell.users.profile import get_profile as read_profile


@dataclass
class ToolDeps:
    settings: Settings
    tenant: str
    #: tenant-bound sessions (row-level security)
    sessions: async_sessionmaker[AsyncSession]
    retrieval: RetrievalDeps
    buffer: SessionBuffer
    broker_url: str
    #: embeds memories an agent stores or corrects; loaded on first use
    documents: Embedder
    reconcile_policy: ReconcilePolicy


class Remembered(BaseModel):
    turn_id: str
    status: str = Field(description="queued: consolidation runs in the background")


class Recall(BaseModel):
    memories: list[MemoryHit]


class Forgotten(BaseModel):
    memory_id: str
    forgotten: bool


class Context(BaseModel):
    messages: list[dict[str, str]] = Field(description="OpenAI-style messages, ready to send")
    data_block: str = Field(description="The memories and summary, quoted as data")
    memories: list[MemoryHit]
    profile: list[str] = Field(default=[], description="The profile facts kept, if asked")
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
    check_turns([turn], deps.settings)
    ids = await asyncio.to_thread(
        enqueue_turns, [turn], tenant=deps.tenant, broker_url=deps.broker_url
    )
    return Remembered(turn_id=ids[0], status="queued")


def _memory_key(memory_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(memory_id)
    except ValueError as exc:
        raise InvalidInput(f"not a memory id: {memory_id!r}") from exc


_QUERY: TypeAdapter[str] = TypeAdapter(Query)


def _query(query: str) -> str:
    """The query by the rules of REST's search: length, and text a person writes."""
    try:
        return _QUERY.validate_python(query)
    except ValidationError as exc:
        raise InvalidInput(f"query: {first_reason(exc)}") from None


async def recall(deps: ToolDeps, *, user_id: str, query: str, k: int | None = None) -> Recall:
    """The user's memories most relevant to `query`, best first, with score parts."""
    hits = await retrieve(
        deps.retrieval, tenant=deps.tenant, user_id=user_id, query=_query(query), k=k
    )
    return Recall(memories=hits)


async def forget(deps: ToolDeps, *, user_id: str, memory_id: str) -> Forgotten:
    """Delete one of the user's memories, as DELETE /v1/memories/{id} does: tombstone,
    text removed, history kept with its content redacted."""
    key = _memory_key(memory_id)
    async with async_tenant_session(deps.sessions, deps.tenant) as session, session.begin():
        await delete_memory(
            session,
            tenant=deps.tenant,
            memory_id=key,
            user_id=user_id,
            reason="forgotten by an agent (MCP forget)",
        )
    await _wrote(deps, user_id)
    return Forgotten(memory_id=memory_id, forgotten=True)


async def get_context(
    deps: ToolDeps,
    *,
    user_id: str,
    query: str,
    session_id: str | None = None,
    include_profile: bool = False,
) -> Context:
    """Context for the agent's next model call: memories as quoted data, the session's
    summary and recent turns (and, if asked, the user's profile facts), inside the
    context token budget."""
    result = await build_context(
        deps.retrieval,
        deps.buffer,
        deps.sessions,
        tenant=deps.tenant,
        user_id=user_id,
        query=_query(query),
        session_id=session_id,
        include_profile=include_profile,
    )
    return Context(
        messages=result.messages,
        data_block=result.data_block,
        memories=result.memories,
        profile=result.profile,
        tokens=result.tokens,
    )


async def get_profile(
    deps: ToolDeps,
    *,
    user_id: str,
    entities_limit: int = DEFAULT_ENTITIES,
    relations_limit: int = DEFAULT_RELATIONS,
) -> UserProfile:
    """The user's current facts by entity and top entities with their relations (the
    same path as GET /v1/users/{id}/profile)."""
    async with async_tenant_session(deps.sessions, deps.tenant) as session:
        return await read_profile(
            session, tenant=deps.tenant, user_id=user_id, entities_limit=entities_limit,
            relations_limit=relations_limit,
        )  # fmt: skip


async def _wrote(deps: ToolDeps, user_id: str) -> None:
    """Read-your-writes behind replicas (memwell/db/recent_writes.py)."""
    await note_write(deps.retrieval.access, deps.settings, tenant=deps.tenant, user_id=user_id)


async def add_memory(deps: ToolDeps, *, user_id: str, memory: NewMemory) -> AddedMemory:
    """Store one memory now, reconciled like consolidation (the same path as
    POST /v1/memories); searchable at once."""
    check_memories([(memory.content, memory.metadata)], deps.settings)
    async with async_tenant_session(deps.sessions, deps.tenant) as session, session.begin():
        result = await add_memories(
            session, tenant=deps.tenant, user_id=user_id, memories=[memory],
            embedder=deps.documents, reconcile=True, policy=deps.reconcile_policy,
        )  # fmt: skip
    await _wrote(deps, user_id)
    return result.results[0]


async def update_memory(
    deps: ToolDeps, *, user_id: str, memory_id: str, patch: MemoryPatch
) -> EditResult:
    """Correct one of the user's memories (the same path as PATCH /v1/memories/{id})."""
    check_memories([(patch.content or "", patch.metadata or {})], deps.settings)
    key = _memory_key(memory_id)
    async with async_tenant_session(deps.sessions, deps.tenant) as session, session.begin():
        edited = await edit_memory(
            session, tenant=deps.tenant, memory_id=key, patch=patch, embedder=deps.documents,
            merge_threshold=deps.settings.merge_threshold, user_id=user_id,
            entities=deps.settings.entities_enabled,
        )  # fmt: skip
    await _wrote(deps, user_id)
    return edited
