"""LlamaIndex's `Memory` with the Memwell block against the live API: the agent's
memory carries Memwell's recalled memories, and what the block is given becomes the
session's turns; a tenant sees only its own."""

from __future__ import annotations

import asyncio

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import Memory

import memwell
from memwell.integrations.llamaindex import MemwellMemoryBlock
from tests.integrations.conftest import ClientOf


def _async(client: memwell.MemoryClient) -> memwell.AsyncMemoryClient:
    key = client._http.headers["Authorization"].removeprefix("Bearer ")
    return memwell.AsyncMemoryClient(client.base_url, api_key=key)


def _memory(block: MemwellMemoryBlock, session_id: str, token_limit: int = 4000) -> Memory:
    # A whitespace tokenizer: the default (tiktoken) fetches its tables on first use.
    return Memory.from_defaults(
        session_id=session_id, memory_blocks=[block], token_limit=token_limit,
        tokenizer_fn=str.split, chat_history_token_ratio=0.5, token_flush_size=10,
    )  # fmt: skip


def test_the_agents_memory_carries_memwells_context(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    user, sid = ids["user"], ids["session"]
    client.add_memory(user_id=user, content="The user plays the cello in an orchestra.")

    async def scenario() -> list[ChatMessage]:
        async with _async(client) as mw:
            block = MemwellMemoryBlock(client=mw, user_id=user, session_id=sid, k=3)
            memory = _memory(block, sid)
            assert await block.aget([]) == ""
            await memory.aput(ChatMessage(role=MessageRole.USER, content="Which instrument?"))
            return await memory.aget()

    messages = asyncio.run(scenario())
    system = messages[0]
    assert system.role == MessageRole.SYSTEM
    assert "cello" in (system.content or "") and "<memories>" in (system.content or "")
    assert messages[-1].content == "Which instrument?"


def test_what_memory_flushes_to_the_block_becomes_the_sessions_turns(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    user, sid = ids["user"], ids["session"]
    said = [f"Message number {i} about my garden and its tomatoes." for i in range(12)]

    async def scenario() -> None:
        async with _async(client) as mw:
            block = MemwellMemoryBlock(client=mw, user_id=user, session_id=sid)
            memory = _memory(block, sid, token_limit=60)
            for i, text in enumerate(said):
                role = MessageRole.USER if i % 2 == 0 else MessageRole.ASSISTANT
                await memory.aput(ChatMessage(role=role, content=text))
            await memory.aget()

    asyncio.run(scenario())
    turns = client.transcript(user_id=user, session_id=sid).turns
    assert turns, "the memory flushed nothing to the block"
    assert [t.content for t in turns] == said[: len(turns)]
    assert [t.role for t in turns[:2]] == ["user", "assistant"]


def test_a_tenant_never_sees_another_tenants_memories(
    client_of: ClientOf, ids: dict[str, str]
) -> None:
    user, sid = ids["user"], ids["session"]
    mine, theirs = client_of(ids["tenant"]), client_of(ids["tenant"] + "-b")
    mine.add_memory(user_id=user, content="The user's PIN is 4711.")

    async def scenario() -> str:
        async with _async(theirs) as mw:
            block = MemwellMemoryBlock(client=mw, user_id=user, session_id=sid)
            await block.aput([ChatMessage(role=MessageRole.USER, content="Their turn.")])
            return await block.aget([ChatMessage(role=MessageRole.USER, content="PIN?")])

    assert "4711" not in asyncio.run(scenario())
    assert mine.transcript(user_id=user, session_id=sid).turns == []
