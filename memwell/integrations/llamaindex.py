"""A LlamaIndex memory block over Memwell (extra `memwell[llamaindex]`).

    from llama_index.core.memory import Memory
    from memwell import AsyncMemoryClient
    from memwell.integrations.llamaindex import MemwellMemoryBlock

    mw = AsyncMemoryClient("http://localhost:8420", api_key="mw_...")
    memory = Memory.from_defaults(
        session_id="s1",
        memory_blocks=[MemwellMemoryBlock(client=mw, user_id="u1", session_id="s1")],
    )

When the agent's memory is read, the block answers with Memwell's context for the
newest user message (POST /v1/context): the recalled memories and the session's
running summary, quoted as data, inside `token_budget`. What the block is given (the
messages `Memory` flushes out of its short-term queue) it records as the session's
turns (POST /v1/turns), so the pipeline consolidates them like any conversation.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory.memory import BaseMemoryBlock
from pydantic import Field

from memwell.sdk import AsyncMemoryClient

ROLES = {
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "system",
    MessageRole.TOOL: "tool",
    MessageRole.FUNCTION: "tool",
}


def _query(messages: list[ChatMessage] | None) -> str | None:
    """The newest user message's text: what the context is recalled for."""
    for message in reversed(messages or []):
        text = (message.content or "").strip()
        if message.role == MessageRole.USER and text:
            return text
    return None


class MemwellMemoryBlock(BaseMemoryBlock[str]):
    """Memwell's recalled memories and session summary as a block of `Memory`."""

    name: str = Field(default="memwell", description="The name of the memory block.")
    client: AsyncMemoryClient
    user_id: str
    session_id: str
    #: the most tokens of context the block adds (None: the server's default)
    token_budget: int | None = None
    #: how many memories at most (None: the server's default)
    k: int | None = None

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = _query(messages)
        if query is None:
            return ""
        options = {
            name: value
            for name, value in (("token_budget", self.token_budget), ("k", self.k))
            if value is not None
        }
        found = await self.client.context(
            user_id=self.user_id, session_id=self.session_id, query=query, **options
        )
        block = (found.model_extra or {}).get("data_block")
        return str(block) if block else ""

    async def _aput(self, messages: list[ChatMessage]) -> None:
        turns = [
            {
                "user_id": self.user_id, "session_id": self.session_id,
                "role": ROLES.get(m.role, "user"), "content": (m.content or "").strip(),
            }
            for m in messages
            if (m.content or "").strip()
        ]  # fmt: skip
        if turns:
            await self.client.add_turns(turns)


__all__ = ["MemwellMemoryBlock"]
