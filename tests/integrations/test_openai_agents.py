"""The OpenAI Agents SDK's Session and the remember/recall tools against the live API:
a Runner keeps its conversation in a Memwell session and calls the tools (the model is
a script of the Agents SDK's own Model interface, so no model endpoint is needed)."""

from __future__ import annotations

import ast
import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, FunctionTool, Model, ModelResponse, Runner, Usage
from agents.memory import SessionSettings
from agents.tool_context import ToolContext
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import memwell
from memwell.integrations.openai_agents import MemwellSession, memory_tools
from tests.integrations.conftest import ClientOf


def _async(client: memwell.MemoryClient) -> memwell.AsyncMemoryClient:
    key = client._http.headers["Authorization"].removeprefix("Bearer ")
    return memwell.AsyncMemoryClient(client.base_url, api_key=key)


async def call(tool: FunctionTool, **arguments: Any) -> Any:
    raw = json.dumps(arguments)
    context = ToolContext(context=None, tool_name=tool.name, tool_call_id="c", tool_arguments=raw)
    out = await tool.on_invoke_tool(context, raw)
    # What the model is shown: the tool's dict, or its text (JSON or a Python repr).
    if isinstance(out, dict):
        return out
    try:
        return json.loads(str(out))
    except ValueError:
        return ast.literal_eval(str(out))


def test_session_adds_gets_pops_and_clears_items(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    items: list[Any] = [
        {"role": "user", "content": "What's the weather in Lisbon?"},
        {"type": "function_call", "call_id": "c1", "name": "weather",
         "arguments": '{"city": "Lisbon"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "Sunny, 24C"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Sunny.",
                                           "annotations": []}]},
    ]  # fmt: skip

    async def scenario() -> None:
        async with _async(client) as mw:
            session = MemwellSession(mw, user_id=ids["user"], session_id=ids["session"])
            assert await session.get_items() == []
            await session.add_items(items[:1])
            await session.add_items(items[1:])
            assert await session.get_items() == items
            assert await session.get_items(limit=2) == items[2:]
            assert await session.pop_item() == items[3]
            assert await session.get_items() == items[:3]
            limited = MemwellSession(mw, user_id=ids["user"], session_id=ids["session"],
                                     session_settings=SessionSettings(limit=1))  # fmt: skip
            assert await limited.get_items() == items[2:3]
            await session.clear_session()
            assert await session.get_items() == []
            assert await session.pop_item() is None

    asyncio.run(scenario())
    # Nothing left of the session's turns in Memwell either.
    assert client.transcript(user_id=ids["user"], session_id=ids["session"]).turns == []


class Scripted(Model):
    """A model that answers from a script: a call of `recall`, then a message."""

    def __init__(self) -> None:
        self.inputs: list[Any] = []

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.inputs.append(kwargs["input"])
        if len(self.inputs) % 2:
            output: Any = ResponseFunctionToolCall(
                type="function_call", call_id=f"r{len(self.inputs)}", name="recall",
                arguments='{"query": "which instrument?", "k": 3}',
            )  # fmt: skip
        else:
            text = ResponseOutputText(type="output_text", text="You play the cello.",
                                      annotations=[])  # fmt: skip
            output = ResponseOutputMessage(
                type="message", id="m1", role="assistant", status="completed", content=[text]
            )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def test_a_runner_keeps_its_conversation_in_the_session_and_recalls(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    user, sid = ids["user"], ids["session"]
    client.add_memory(user_id=user, content="The user plays the cello.")
    model = Scripted()

    async def scenario() -> str:
        async with _async(client) as mw:
            agent = Agent(name="helper", model=model,
                          tools=memory_tools(mw, user_id=user, session_id=sid))  # fmt: skip
            session = MemwellSession(mw, user_id=user, session_id=sid)
            result = await Runner.run(agent, "What do I play?", session=session)
            await Runner.run(agent, "And again?", session=session)
            return str(result.final_output)

    assert asyncio.run(scenario()) == "You play the cello."
    # The tool's output reached the model: Memwell's recall found the memory.
    outputs = [i for i in model.inputs[1] if i.get("type") == "function_call_output"]
    assert "cello" in str(outputs[0]["output"])
    # The second run started from the first run's items, read back from Memwell.
    assert model.inputs[2][0] == {"role": "user", "content": "What do I play?"}
    turns = client.transcript(user_id=user, session_id=sid).turns
    assert [t.role for t in turns][:4] == ["user", "assistant", "tool", "assistant"]


def test_remember_and_recall_answer_as_the_mcp_tools(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    user, sid = ids["user"], ids["session"]
    client.add_memory(user_id=user, content="The user is allergic to peanuts.")

    async def scenario() -> tuple[Any, Any]:
        async with _async(client) as mw:
            remember, recall = memory_tools(mw, user_id=user, session_id=sid)
            return await call(remember, content="I like jazz."), await call(
                recall, query="allergies", k=2
            )

    remembered, recalled = asyncio.run(scenario())
    assert remembered["status"] == "queued"
    assert client.turn_status(remembered["turn_id"]).status in ("pending", "processed")
    assert recalled["memories"][0]["content"] == "The user is allergic to peanuts."
    assert {"score", "relevance", "importance", "recency"} <= set(recalled["memories"][0])


def test_a_tenant_never_sees_another_tenants_session_or_memories(
    client_of: ClientOf, ids: dict[str, str]
) -> None:
    user, sid = ids["user"], ids["session"]
    mine, theirs = client_of(ids["tenant"]), client_of(ids["tenant"] + "-b")
    mine.add_memory(user_id=user, content="The user's PIN is 4711.")

    async def scenario() -> tuple[list[Any], Any, list[Any]]:
        async with _async(mine) as a, _async(theirs) as b:
            await MemwellSession(a, user_id=user, session_id=sid).add_items(
                [{"role": "user", "content": "My PIN is 4711."}]
            )
            other = MemwellSession(b, user_id=user, session_id=sid)
            seen = await other.get_items()
            popped = await other.pop_item()
            _, recall = memory_tools(b, user_id=user, session_id=sid)
            found = (await call(recall, query="PIN"))["memories"]
            return (
                seen + ([popped] if popped else []),
                found,
                await MemwellSession(a, user_id=user, session_id=sid).get_items(),
            )

    seen, found, still = asyncio.run(scenario())
    assert seen == [] and found == [] and len(still) == 1
