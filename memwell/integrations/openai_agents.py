"""The OpenAI Agents SDK over Memwell (extra `memwell[openai-agents]`): a `Session`
backed by a Memwell session, and the `remember` and `recall` function tools.

    from agents import Agent, Runner
    from memwell import AsyncMemoryClient
    from memwell.integrations.openai_agents import MemwellSession, memory_tools

    mw = AsyncMemoryClient("http://localhost:8420", api_key="mw_...")
    agent = Agent(name="helper", tools=memory_tools(mw, user_id="u1", session_id="s1"))
    await Runner.run(agent, "Hi", session=MemwellSession(mw, user_id="u1", session_id="s1"))

The session's items are the Memwell session's turns (POST /v1/turns), so the pipeline
consolidates the conversation into memories; each turn keeps the whole item in its
metadata ("openai_agents", at most 64 KiB as JSON), so tool calls and their outputs
come back as they went in. `pop_item` deletes the newest turn; `clear_session` the
session's turns and buffer (memories made from them stay).

The tools behave as the MCP server's tools of the same names: `remember` enqueues a
turn for consolidation and answers `{"turn_id", "status": "queued"}`; `recall` runs
Memwell's search and answers `{"memories": [...]}` with each hit's score parts. The
user and session are bound by the application, never chosen by the model.
"""

from __future__ import annotations

import json
from typing import Any

from agents import FunctionTool, function_tool
from agents.items import TResponseInputItem
from agents.memory import SessionABC, SessionSettings
from agents.memory.session_settings import resolve_session_limit

from memwell.sdk import AsyncMemoryClient, TranscriptTurn

#: the turn metadata key that holds the whole item
META = "openai_agents"
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
#: item types whose turn is the tool's side of the conversation
TOOL_OUTPUTS = ("function_call_output", "computer_call_output", "custom_tool_call_output")


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str) and content.strip():
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        text = " ".join(p for p in parts if isinstance(p, str) and p.strip())
        if text:
            return text
    output = item.get("output")
    if isinstance(output, str) and output.strip():
        return output
    name = item.get("name")
    kind = str(item.get("type", "message"))
    return f"({kind}: {name})" if name else f"({kind})"


def _role(item: dict[str, Any]) -> str:
    if "role" in item:
        return ROLES.get(str(item["role"]), "user")
    return "tool" if item.get("type") in TOOL_OUTPUTS else "assistant"


def _item(turn: TranscriptTurn) -> TResponseInputItem:
    stored = turn.metadata.get(META)
    if isinstance(stored, dict):
        return stored  # type: ignore[return-value]
    # A turn another door sent: a plain message of its role.
    role = "assistant" if turn.role in ("assistant", "tool") else turn.role
    return {"role": role, "content": turn.content}  # type: ignore[return-value,misc]


class MemwellSession(SessionABC):
    """An Agents SDK session whose items are one Memwell session's turns."""

    def __init__(
        self,
        client: AsyncMemoryClient,
        *,
        user_id: str,
        session_id: str,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.client = client
        self.user_id = user_id
        self.session_id = session_id
        self.session_settings = session_settings

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The newest `limit` items (default: the settings' limit, else all, up to the
        transcript's 1,000 turns), oldest first."""
        transcript = await self.client.transcript(
            user_id=self.user_id, session_id=self.session_id,
            limit=resolve_session_limit(limit, self.session_settings),
        )  # fmt: skip
        return [_item(turn) for turn in transcript.turns]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if not items:
            return
        turns = []
        for raw in items:
            item = json.loads(json.dumps(raw, default=str))  # plain JSON, as stored
            turns.append(
                {
                    "user_id": self.user_id, "session_id": self.session_id,
                    "role": _role(item), "content": _text(item), "metadata": {META: item},
                }
            )  # fmt: skip
        await self.client.add_turns(turns)

    async def pop_item(self) -> TResponseInputItem | None:
        transcript = await self.client.transcript(
            user_id=self.user_id, session_id=self.session_id, limit=1
        )
        if not transcript.turns:
            return None
        newest = transcript.turns[-1]
        await self.client.clear_transcript(
            user_id=self.user_id, session_id=self.session_id, turn_ids=[newest.turn_id]
        )
        return _item(newest)

    async def clear_session(self) -> None:
        await self.client.clear_transcript(user_id=self.user_id, session_id=self.session_id)


def memory_tools(client: AsyncMemoryClient, *, user_id: str, session_id: str) -> list[FunctionTool]:
    """`remember` and `recall` for an Agent, bound to one user and session."""

    @function_tool
    async def remember(content: str) -> dict[str, Any]:
        """Remember something about the user for later conversations (consolidated in
        the background).

        Args:
            content: What to remember, as the user said it or as a plain statement.
        """
        turn_id = await client.add_turn(user_id=user_id, session_id=session_id, content=content)
        return {"turn_id": turn_id, "status": "queued"}

    @function_tool
    async def recall(query: str, k: int | None = None) -> dict[str, Any]:
        """Recall what is remembered about the user that is relevant to a query, best
        first, each memory with its score parts.

        Args:
            query: What to look for, in plain words.
            k: How many memories at most (default: the server's).
        """
        options = {} if k is None else {"k": k}
        found = await client.search(user_id=user_id, query=query, **options)
        return {"memories": [hit.model_dump(mode="json") for hit in found.hits]}

    return [remember, recall]


__all__ = ["MemwellSession", "memory_tools"]
