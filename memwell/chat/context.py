"""Ready-to-use context for apps that call their own model (POST /v1/context).

The same reads as the chat path, run concurrently: the session buffer (summary and
recent turns) and the one retrieval query, plus the session's newest stored turns, so
turns that never passed through the buffer (POST /v1/turns, `enqueue_turns`, a Redis
restart) are recent too (memwell/chat/stored_turns.py). Then the same assembly:
memories are quoted data inside the system message, and the token budget trims
memories first, then the oldest recent turns.

With `include_profile`, the user's profile (memwell/users/profile.py) is read in the
same gather and goes in as quoted facts, inside the same budget; without it, nothing
more is read or counted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memwell.buffer.session_buffer import BufferedTurn, BufferSnapshot, SessionBuffer
from memwell.chat.assembly import assemble_context, render_data_block
from memwell.chat.profile_block import profile_sentences
from memwell.chat.stored_turns import merge_recent, newest_stored_turns
from memwell.core.errors import NotFound
from memwell.db.tenancy import async_tenant_session
from memwell.retrieval.search import MemoryHit, Overrides, SearchFilters
from memwell.retrieval.service import RetrievalDeps, retrieve
from memwell.users.profile import get_profile

# A context's profile: every slot, and the relations of the few entities the user
# mentions most; the budget's profile share cuts what is left over.
PROFILE_ENTITIES: Final = 5
PROFILE_RELATIONS: Final = 10


@dataclass(frozen=True)
class ContextResult:
    messages: list[dict[str, str]]
    data_block: str  # memories + summary, quoted, for callers who build their own prompt
    memories: list[MemoryHit]
    summary: str | None
    recent: list[BufferedTurn]
    tokens: int
    budget: int
    profile: list[str]  # the profile's facts that fit; empty unless asked for


async def _profile_facts(
    sessions: async_sessionmaker[AsyncSession], *, tenant: str, user_id: str
) -> list[str]:
    async with async_tenant_session(sessions, tenant) as session:
        try:
            profile = await get_profile(
                session, tenant=tenant, user_id=user_id, entities_limit=PROFILE_ENTITIES,
                relations_limit=PROFILE_RELATIONS,
            )  # fmt: skip
        except NotFound:  # a user with nothing stored yet: context still answers
            return []
    return profile_sentences(profile)


async def _search_and_profile(
    searching: Awaitable[list[MemoryHit]], profiling: Awaitable[list[str]] | None
) -> tuple[list[MemoryHit], list[str]]:
    if profiling is None:
        return await searching, []
    hits, facts = await asyncio.gather(searching, profiling)
    return hits, facts


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
    include_profile: bool = False,
) -> ContextResult:
    """Memories, session summary and recent turns for `query`, inside `budget` tokens,
    and the user's profile facts when asked. Without a session, no summary or turns.
    The session's stored turns come through the retrieval's read pool, the profile
    through `sessions`; both run as the tenant (row-level security)."""
    searching = _search_and_profile(
        retrieve(
            retrieval, tenant=tenant, user_id=user_id, query=query, k=k, filters=filters,
            as_of=as_of, overrides=overrides,
        ),
        _profile_facts(sessions, tenant=tenant, user_id=user_id) if include_profile else None,
    )  # fmt: skip
    if session_id is None:
        hits, facts = await searching
        snapshot = BufferSnapshot(turns=[], total_tokens=0, summary=None)
        recent: list[BufferedTurn] = []
    else:
        # The two reads first: they are sent before the query embeds (which may hold
        # the loop), so their answers are in by the time the search is.
        snapshot, stored, (hits, facts) = await asyncio.gather(
            buffer.read(tenant, user_id, session_id),
            newest_stored_turns(
                retrieval.reads, tenant=tenant, user_id=user_id, session_id=session_id
            ),
            searching,
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
        profile=facts,
        **extra,
    )
    return ContextResult(
        messages=context.messages,
        data_block=render_data_block(context.memories, snapshot.summary, context.profile),
        memories=context.memories,
        summary=snapshot.summary,
        recent=context.recent,
        tokens=context.tokens,
        budget=resolved_budget,
        profile=context.profile,
    )
