"""The MCP server, driven by the official MCP SDK's own client: over stdio against a
subprocess, and over streamable HTTP, on the real stack."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import Memory, MemoryEvent, Turn
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.live_api import free_port

TOOLS = {
    "remember", "recall", "forget", "get_context", "get_profile", "add_memory", "update_memory"
}  # fmt: skip


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data: dict[str, Any] = result.structured_content
    return data


def _turn_status(db: sessionmaker[Session], tenant: str, turn_id: str) -> str | None:
    with db() as session:
        return session.scalar(select(Turn.status).where(Turn.tenant == tenant, Turn.id == turn_id))


def test_stdio_remember_recall_context_forget(
    stack_env: dict[str, str], worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    tenant, user = ids["tenant"], ids["user"]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memwell", "mcp", "--tenant", tenant],
        env={**stack_env, "MEMWELL_LOG_LEVEL": "WARNING"},
    )

    async def remember_phase() -> str:
        async with Client(params) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names == TOOLS
            stored = _structured(
                await client.call_tool(
                    "remember",
                    {
                        "user_id": user,
                        "content": "My daughter Lena was born in 2019.",
                        "session_id": "s1",
                        "turn_id": "mcp-turn-1",
                    },
                )
            )
            return str(stored["turn_id"])

    turn_id = asyncio.run(remember_phase())
    assert turn_id == "mcp-turn-1"
    wait_for(lambda: _turn_status(db, tenant, turn_id) == "processed", timeout=60)

    async def recall_phase() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], Any]:
        async with Client(params) as client:
            found = _structured(
                await client.call_tool("recall", {"user_id": user, "query": "daughter's name"})
            )
            context = _structured(
                await client.call_tool(
                    "get_context", {"user_id": user, "query": "When was Lena born?"}
                )
            )
            memory_id = found["memories"][0]["id"]
            gone = _structured(
                await client.call_tool("forget", {"user_id": user, "memory_id": memory_id})
            )
            after = _structured(
                await client.call_tool("recall", {"user_id": user, "query": "daughter's name"})
            )
            again = await client.call_tool("forget", {"user_id": user, "memory_id": memory_id})
            return found, context, {"gone": gone, "after": after}, again

    found, context, forgetting, again = asyncio.run(recall_phase())
    assert "Lena" in found["memories"][0]["content"]
    assert found["memories"][0]["relevance"] > 0
    assert "Lena" in context["data_block"] and "not instructions" in context["data_block"]
    assert context["messages"][0]["role"] == "system"
    assert context["messages"][-1] == {"role": "user", "content": "When was Lena born?"}
    assert forgetting["gone"]["forgotten"] is True
    assert forgetting["after"]["memories"] == []
    # A domain error reaches the agent as a tool error it can read, not a crash.
    assert again.is_error
    message = " ".join(getattr(part, "text", "") for part in again.content)
    gone_id = forgetting["gone"]["memory_id"]
    assert "not-found" in message and f"memory {gone_id} not found" in message
    with db() as session:
        events = session.scalars(
            select(MemoryEvent).where(MemoryEvent.tenant == tenant, MemoryEvent.event == "delete")
        ).all()
        forgotten_id = events[0].memory_id if events else None
        history = session.scalars(
            select(MemoryEvent).where(MemoryEvent.memory_id == forgotten_id)
        ).all()
        row = session.get(Memory, forgotten_id) if forgotten_id else None
    assert len(events) == 1 and events[0].old_content is None
    # Forgetting removes the text everywhere, as REST deletion does.
    assert row is not None and row.content == "[redacted]" and row.deleted_at is not None
    assert all("Lena" not in (e.old_content or "") + (e.new_content or "") for e in history)


@pytest.fixture
def mcp_http(stack_env: dict[str, str], ids: dict[str, str]) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "memwell", "mcp", "--transport", "http",
         "--port", str(port), "--tenant", ids["tenant"]],
        env={**stack_env, "MEMWELL_LOG_LEVEL": "WARNING"},
        stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"

    def listening() -> bool:
        import socket

        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(listening, timeout=60, interval=0.2, what="the MCP HTTP server")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_streamable_http_serves_the_same_tools(
    mcp_http: str, worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    async def scenario() -> tuple[set[str], dict[str, Any], Any]:
        async with Client(mcp_http) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            stored = _structured(
                await client.call_tool(
                    "remember", {"user_id": ids["user"], "content": "I teach chemistry."}
                )
            )
            invalid = await client.call_tool("recall", {"user_id": ids["user"], "query": ""})
            return names, stored, invalid

    names, stored, invalid = asyncio.run(scenario())
    assert names == TOOLS
    assert invalid.is_error  # schema validation: query must not be empty
    wait_for(lambda: _turn_status(db, ids["tenant"], stored["turn_id"]) == "processed", timeout=60)


def test_stdio_add_and_correct_a_memory(stack_env: dict[str, str], ids: dict[str, str]) -> None:
    tenant, user = ids["tenant"], ids["user"]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memwell", "mcp", "--tenant", tenant],
        env={**stack_env, "MEMWELL_LOG_LEVEL": "WARNING"},
    )

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], Any]:
        async with Client(params) as client:
            added = _structured(
                await client.call_tool(
                    "add_memory",
                    {"user_id": user, "content": "The user is allergic to peanuts.",
                     "importance": 0.9, "source": "tool:allergy-check"},
                )
            )  # fmt: skip
            memory_id = added["memory_id"]
            fixed = _structured(
                await client.call_tool(
                    "update_memory",
                    {"user_id": user, "memory_id": memory_id,
                     "content": "The user is allergic to walnuts, not peanuts."},
                )
            )  # fmt: skip
            found = _structured(
                await client.call_tool("recall", {"user_id": user, "query": "allergies"})
            )
            foreign = await client.call_tool(
                "update_memory",
                {"user_id": user + "-other", "memory_id": memory_id, "importance": 0.1},
            )
            return added, fixed, found, foreign

    added, fixed, found, foreign = asyncio.run(scenario())
    assert added["action"] == "added"
    assert fixed["content"] == "The user is allergic to walnuts, not peanuts."
    assert found["memories"][0]["id"] == added["memory_id"]
    assert "walnuts" in found["memories"][0]["content"]
    assert foreign.is_error  # another user's memory is not found for this user
    assert "not-found" in " ".join(getattr(part, "text", "") for part in foreign.content)
