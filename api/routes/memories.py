"""Search, context and one memory by id: thin wrappers over memwell's service functions."""

from __future__ import annotations

import uuid
from dataclasses import asdict

from fastapi import APIRouter

from api.deps import ReadTenantDep, StateDep, TenantDep
from api.schemas import (
    ContextRequest,
    ContextResponse,
    RecentTurn,
    SearchRequest,
    SearchResponse,
)
from memwell.chat.context import build_context
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
    )
    return ContextResponse(
        messages=result.messages,
        data_block=result.data_block,
        memories=result.memories,
        summary=result.summary,
        recent=[RecentTurn(**asdict(t)) for t in result.recent],
        tokens=result.tokens,
        token_budget=result.budget,
    )


@router.get("/memories/{memory_id}")
async def get_one(memory_id: uuid.UUID, state: StateDep, tenant: TenantDep) -> MemoryRecord:
    async with state.sessions() as session:
        return await get_memory(session, tenant=tenant, memory_id=memory_id)


@router.delete("/memories/{memory_id}")
async def delete_one(memory_id: uuid.UUID, state: StateDep, tenant: TenantDep) -> MemoryRecord:
    async with state.sessions() as session, session.begin():
        return await delete_memory(session, tenant=tenant, memory_id=memory_id)


@router.get("/memories/{memory_id}/history")
async def get_history(memory_id: uuid.UUID, state: StateDep, tenant: TenantDep) -> MemoryHistory:
    async with state.sessions() as session:
        events = await memory_history(session, tenant=tenant, memory_id=memory_id)
    return MemoryHistory(memory_id=memory_id, events=events)
