"""Memories: list, add, search, context, and one memory by id (read, edit, delete,
history). Each route is a thin wrapper over one of memwell's service functions."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, Json, field_validator

from api.deps import ReadTenantDep, StateDep, TenantDep, WriteTenantDep
from api.schemas import (
    ContextRequest,
    ContextResponse,
    RecentTurn,
    SearchRequest,
    SearchResponse,
)
from memwell.auth.size_limits import check_memories
from memwell.chat.context import build_context
from memwell.db.recent_writes import note_write, wrote_recently
from memwell.db.replicas import read_session, reads_on_primary
from memwell.intake.turns import Identifier, Instant, check_metadata
from memwell.memories.add import MAX_BATCH, AddResult, MemoryKind, NewMemory, add_memories
from memwell.memories.edit import EditResult, MemoryPatch, update_memory
from memwell.memories.listing import MAX_PAGE, MemoryFilters, MemoryPage, Sort, list_memories
from memwell.memories.record import MemoryHistory, MemoryRecord
from memwell.memories.service import delete_memory, get_memory, memory_history
from memwell.retrieval.service import retrieve

router = APIRouter(prefix="/v1", tags=["memories"])


@router.post("/memories/search")
async def post_search(
    body: SearchRequest, state: StateDep, tenant: ReadTenantDep
) -> SearchResponse:
    hits = await retrieve(
        state.retrieval,
        tenant=tenant,
        user_id=body.user_id,
        query=body.query,
        k=body.k,
        filters=body.filters.to_domain(),
        as_of=body.as_of,
        overrides=body.scoring.to_domain(),
    )
    return SearchResponse(hits=hits)


@router.post("/context")
async def post_context(
    body: ContextRequest, state: StateDep, tenant: ReadTenantDep
) -> ContextResponse:
    result = await build_context(
        state.retrieval,
        state.chat.buffer,
        state.sessions,
        tenant=tenant,
        user_id=body.user_id,
        session_id=body.session_id,
        query=body.query,
        budget=body.token_budget,
        k=body.k,
        filters=body.filters.to_domain(),
        as_of=body.as_of,
        overrides=body.scoring.to_domain(),
        system_prompt=body.system_prompt,
        include_profile=body.include_profile,
    )
    return ContextResponse(
        messages=result.messages,
        data_block=result.data_block,
        memories=result.memories,
        summary=result.summary,
        recent=[RecentTurn(**asdict(t)) for t in result.recent],
        tokens=result.tokens,
        token_budget=result.budget,
        profile=result.profile,
    )


@router.get("/memories/{memory_id}")
async def get_one(memory_id: uuid.UUID, state: StateDep, tenant: TenantDep) -> MemoryRecord:
    async with state.sessions() as session:
        return await get_memory(session, tenant=tenant, memory_id=memory_id)


@router.delete("/memories/{memory_id}")
async def delete_one(memory_id: uuid.UUID, state: StateDep, tenant: TenantDep) -> MemoryRecord:
    async with state.sessions() as session, session.begin():
        deleted = await delete_memory(session, tenant=tenant, memory_id=memory_id)
    await note_write(state.redis, state.settings, tenant=tenant, user_id=deleted.user_id)
    return deleted


@router.get("/memories/{memory_id}/history")
async def get_history(memory_id: uuid.UUID, state: StateDep, tenant: TenantDep) -> MemoryHistory:
    async with state.sessions() as session:
        events = await memory_history(session, tenant=tenant, memory_id=memory_id)
    return MemoryHistory(memory_id=memory_id, events=events)


class AddMemoriesRequest(BaseModel):
    """Memories to store for one user, as given or reconciled like consolidation."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "user_id": "u1",
                    "memories": [
                        {"content": "The user is allergic to nuts.", "kind": "fact",
                         "importance": 0.9, "source": "tool:allergy-check"}
                    ],
                    "reconcile": True,
                }
            ]
        },
    )  # fmt: skip

    user_id: Identifier
    memories: list[NewMemory] = Field(min_length=1, max_length=MAX_BATCH)
    reconcile: bool = Field(
        default=True,
        strict=True,
        description="true: dedup, merge and supersede as consolidation does; false: store "
        "as given (an exact duplicate still reinforces the live memory).",
    )


class MemoryListQuery(BaseModel):
    """A closed model: a parameter the list does not know is refused, never ignored."""

    model_config = ConfigDict(extra="forbid")

    user_id: Identifier
    kind: list[MemoryKind] | None = None
    session_id: Identifier | None = None
    agent_id: Identifier | None = None
    created_after: Instant | None = None
    created_before: Instant | None = None
    pinned: bool | None = None
    metadata: Json[dict[str, Any]] | None = Field(
        default=None,
        description="A JSON object: memories whose metadata contains it (JSONB "
        'containment, as search\'s metadata filter), e.g. `{"topic":"food"}`.',
    )
    include: list[Literal["deleted", "superseded"]] | None = Field(
        default=None, description="Also list tombstoned and/or superseded memories."
    )
    sort: Sort = "newest"
    limit: int = Field(default=50, ge=1, le=MAX_PAGE)
    #: room for any cursor the service issues (long non-ASCII ids, escaped)
    cursor: str | None = Field(
        default=None, max_length=8192, description="The previous page's `next_cursor`."
    )

    def filters(self) -> MemoryFilters:
        include = set(self.include or ())
        return MemoryFilters(
            kinds=tuple(self.kind) if self.kind else None, session_id=self.session_id,
            agent_id=self.agent_id, created_after=self.created_after,
            created_before=self.created_before, pinned=self.pinned,
            include_deleted="deleted" in include, include_superseded="superseded" in include,
            metadata=self.metadata or None,
        )  # fmt: skip

    @field_validator("metadata")
    @classmethod
    def _metadata_is_plain_json(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        # Checked like stored metadata: jsonb would refuse it with a server error.
        return None if value is None else check_metadata(value)


@router.get("/memories", summary="List a user's memories, paged")
async def get_memories(
    query: Annotated[MemoryListQuery, Query()], state: StateDep, tenant: ReadTenantDep
) -> MemoryPage:
    """Newest first by default (or by importance or strength), with a total and a
    keyset cursor that stays stable while memories are added."""
    on_primary = state.read_sessions is None or await wrote_recently(
        state.redis, tenant=tenant, user_id=query.user_id
    )
    with reads_on_primary(on_primary):
        return await read_session(
            state.read_sessions, state.sessions,
            lambda session: list_memories(
                session, tenant=tenant, user_id=query.user_id, filters=query.filters(),
                sort=query.sort, limit=query.limit, cursor=query.cursor,
            ),
        )  # fmt: skip


@router.post("/memories", summary="Add memories directly")
async def post_memories(
    body: AddMemoriesRequest, state: StateDep, tenant: WriteTenantDep
) -> AddResult:
    """Stored and embedded before the response: searchable at once. With a remote
    embedding endpoint, the call includes its round trip."""
    check_memories([(m.content, m.metadata) for m in body.memories], state.settings)
    async with state.sessions() as session, session.begin():
        added = await add_memories(
            session, tenant=tenant, user_id=body.user_id, memories=body.memories,
            embedder=state.documents, reconcile=body.reconcile, policy=state.reconcile_policy,
        )  # fmt: skip
    await note_write(state.redis, state.settings, tenant=tenant, user_id=body.user_id)
    return added


@router.patch("/memories/{memory_id}", summary="Edit, pin or expire a memory")
async def patch_memory(
    memory_id: uuid.UUID, body: MemoryPatch, state: StateDep, tenant: WriteTenantDep
) -> EditResult:
    """A content change re-embeds the memory and reports the live memories it now
    collides with (a paraphrase, or a conflicting fact); it never merges them."""
    check_memories([(body.content or "", body.metadata or {})], state.settings)
    async with state.sessions() as session, session.begin():
        edited = await update_memory(
            session, tenant=tenant, memory_id=memory_id, patch=body, embedder=state.documents,
            merge_threshold=state.settings.merge_threshold,
            entities=state.settings.entities_enabled,
        )  # fmt: skip
    await note_write(state.redis, state.settings, tenant=tenant, user_id=edited.user_id)
    return edited
