"""Every door ranks alike: the same query through REST, the SDK, an MCP client and the
OpenAI Agents SDK's `recall` tool returns
the same memories in the same order with the same scores. Covered: a hybrid text match
that the vector half alone would miss, and a user searched through a per-user ANN index.
A user's profile reads the same through every door too, and fails alike for a stranger.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from sqlalchemy import create_engine, pool, select
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.core.settings import get_settings
from memwell.db.models import MemoryAnnIndex
from memwell.embeddings import build_embedder
from memwell.retrieval.ann import maintain_ann_indexes
from memwell.sdk import UserProfile
from tests.support.live_api import serve_api
from tests.support.memory_factory import add_memory
from tests.support.profile_factory import seed_profile

ANN_ROWS = 60
FACTS = [
    "My sister Maya lives in Boston and teaches piano.",
    "I adopted a grey cat called Miso last spring.",
    "I am allergic to peanuts.",
    "My favourite dish is my grandmother's lentil soup.",
    "I work as a nurse at the city hospital.",
]
# Stored under the vector of an unrelated sentence: only the full-text half finds it.
TEXT_ONLY = ("The Zanzibar trip is booked for October.", "I enjoy quiet mornings.")
QUERIES = ["When is the Zanzibar trip?", "What is my sister's name?", "Do I have pets?"]

Ranked = list[tuple[str, float]]


def _store(db: sessionmaker[Session], tenant: str, user: str, texts: list[str]) -> None:
    embedder = build_embedder(get_settings())
    vectors = embedder.embed([*texts, TEXT_ONLY[1]])
    with db.begin() as session:
        for content, vector in zip(texts, vectors, strict=False):
            add_memory(
                session, tenant=tenant, user_id=user, content=content, embedding=vector,
                model=embedder.model_name,
            )  # fmt: skip
        add_memory(
            session, tenant=tenant, user_id=user, content=TEXT_ONLY[0], embedding=vectors[-1],
            model=embedder.model_name,
        )  # fmt: skip


def _ranked(hits: list[Any]) -> Ranked:
    return [(str(_field(h, "id")), round(float(_field(h, "score")), 5)) for h in hits]


def _field(hit: Any, name: str) -> Any:
    return hit[name] if isinstance(hit, dict) else getattr(hit, name)


def _mcp_recall(env: dict[str, str], tenant: str, user: str) -> list[Ranked]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memwell", "mcp", "--tenant", tenant],
        env={**env, "MEMWELL_LOG_LEVEL": "WARNING"},
    )

    async def run() -> list[Ranked]:
        async with Client(params) as client:
            found = []
            for query in QUERIES:
                result = await client.call_tool("recall", {"user_id": user, "query": query})
                assert not result.is_error, result.content
                found.append(_ranked(result.structured_content["memories"]))
            return found

    return asyncio.run(run())


def test_rest_sdk_and_mcp_return_the_same_ranking(
    stack_env: dict[str, str],
    db: sessionmaker[Session],
    make_key: Callable[..., dict[str, str]],
    ids: dict[str, str],
) -> None:
    tenant, small, big = ids["tenant"], ids["user"], ids["user"] + "-big"
    _store(db, tenant, small, FACTS)
    _store(db, tenant, big, FACTS + [f"Note {i}: errands for day {i}." for i in range(ANN_ROWS)])
    engine = create_engine(stack_env["DATABASE_URL"], poolclass=pool.NullPool)
    try:
        maintain_ann_indexes(engine, threshold=ANN_ROWS)
    finally:
        engine.dispose()
    with db() as session:
        indexed = session.scalars(
            select(MemoryAnnIndex.user_id).where(MemoryAnnIndex.tenant == tenant)
        ).all()
    assert indexed == [big]

    headers = make_key(tenant, ("read", "write"))
    key = headers["Authorization"].removeprefix("Bearer ")
    # A fresh API process state: its ANN registry sees the index made above.
    with serve_api() as url:
        for user in (small, big):
            rest = [
                _ranked(
                    httpx.post(
                        f"{url}/v1/memories/search",
                        json={"user_id": user, "query": q},
                        headers=headers,
                        timeout=30,
                    ).json()["hits"]
                )
                for q in QUERIES
            ]
            with memwell.MemoryClient(url, api_key=key, timeout=30) as client:
                sdk = [_ranked(client.search(user_id=user, query=q).hits) for q in QUERIES]
            mcp = _mcp_recall(stack_env, tenant, user)
            agents_tool = _agents_recall(url, key, user)
            assert rest == sdk == mcp == agents_tool, user
            # The hybrid half reached every door: the text-only memory is found.
            with db() as session:
                zanzibar = _memory_id(session, tenant, user, TEXT_ONLY[0])
            assert rest[0] and rest[0][0][0] == zanzibar


def _agents_recall(url: str, key: str, user: str) -> list[Ranked]:
    """The OpenAI Agents SDK's `recall` tool, invoked as a Runner invokes it."""
    from agents.tool_context import ToolContext

    from memwell.integrations.openai_agents import memory_tools

    async def run() -> list[Ranked]:
        async with memwell.AsyncMemoryClient(url, api_key=key, timeout=30) as client:
            recall = memory_tools(client, user_id=user, session_id="parity")[1]
            found = []
            for query in QUERIES:
                raw = json.dumps({"query": query})
                context = ToolContext(
                    context=None, tool_name="recall", tool_call_id="c", tool_arguments=raw
                )
                out = await recall.on_invoke_tool(context, raw)
                assert isinstance(out, dict), out
                found.append(_ranked(out["memories"]))
            return found

    return asyncio.run(run())


def _memory_id(session: Session, tenant: str, user: str, content: str) -> str:
    from memwell.db.models import Memory

    found = session.scalar(
        select(Memory.id).where(
            Memory.tenant == tenant, Memory.user_id == user, Memory.content == content
        )
    )
    return str(found)


def _mcp_profiles(env: dict[str, str], tenant: str, calls: list[dict[str, Any]]) -> list[Any]:
    """Each call's structured result, or its error text when the tool failed."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memwell", "mcp", "--tenant", tenant],
        env={**env, "MEMWELL_LOG_LEVEL": "WARNING"},
    )

    async def run() -> list[Any]:
        async with Client(params) as client:
            found: list[Any] = []
            for arguments in calls:
                result = await client.call_tool("get_profile", arguments)
                found.append(str(result.content) if result.is_error else result.structured_content)
            return found

    return asyncio.run(run())


def test_every_door_reads_the_same_profile(
    stack_env: dict[str, str],
    db: sessionmaker[Session],
    make_key: Callable[..., dict[str, str]],
    ids: dict[str, str],
) -> None:
    tenant, user = ids["tenant"], ids["user"]
    with db.begin() as session:
        seed_profile(session, tenant=tenant, user_id=user)
    headers = make_key(tenant, ("read",))
    key = headers["Authorization"].removeprefix("Bearer ")
    limits = {"entities_limit": 3, "relations_limit": 2}
    with serve_api() as url:
        rest = [
            httpx.get(f"{url}/v1/users/{user}/profile", params=p, headers=headers, timeout=30)
            for p in ({}, limits)
        ]
        assert [r.status_code for r in rest] == [200, 200], rest[0].text
        with memwell.MemoryClient(url, api_key=key, timeout=30) as client:
            sdk = [client.get_profile(user), client.get_profile(user, **limits)]
            with pytest.raises(memwell.NotFoundError):
                client.get_profile(user + "-nobody")

        async def read_async() -> Any:
            async with memwell.AsyncMemoryClient(url, api_key=key, timeout=30) as client:
                return await client.get_profile(user, **limits)

        sdk_async = asyncio.run(read_async())
    mcp = _mcp_profiles(
        stack_env, tenant, [{"user_id": user}, {"user_id": user, **limits},
                            {"user_id": user + "-nobody"}],
    )  # fmt: skip
    parsed = [UserProfile.model_validate(r.json()) for r in rest]
    assert parsed == sdk == [UserProfile.model_validate(m) for m in mcp[:2]]
    assert sdk_async == parsed[1]
    assert len(parsed[1].entities) == 3 and len(parsed[1].entities[0].relations) == 2
    assert parsed[0].facts[0].slots["lives_in"].value == "Boston"
    assert "not-found" in mcp[2]
