"""The chat doors answered by the real model: /v1/chat, whole and streamed, and the
OpenAI-compatible /v1/chat/completions through the official `openai` client, plain,
streamed and with a tool."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.real_llm.conftest import LlmStack, new_user

# A real model on a small CPU: minutes, not the default run's 300 s per test.
pytestmark = [pytest.mark.real_llm, pytest.mark.timeout(1800)]

WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _client(stack: LlmStack) -> openai.OpenAI:
    # The local stack serves without keys; the SDK insists on one.
    return openai.OpenAI(base_url=f"{stack.api_url}/v1", api_key="unused", timeout=300)


def test_readyz_reports_the_model_server(llm_stack: LlmStack) -> None:
    body = httpx.get(f"{llm_stack.api_url}/readyz", timeout=10).json()
    server = body["model_server"]
    assert server["status"] == "up" and server["models"] == [llm_stack.alias]
    assert server["port"] == json.loads((llm_stack.up.data_dir / "ports.json").read_text())["llm"]


def test_chat_answers_with_the_model(llm_stack: LlmStack) -> None:
    body = {"user_id": new_user(), "session_id": "s1", "message": "Say hello in one word."}
    answer = httpx.post(f"{llm_stack.api_url}/v1/chat", json=body, timeout=300)
    assert answer.status_code == 200, answer.text
    reply = answer.json()
    assert reply["model"] == llm_stack.alias and reply["reply"].strip()
    assert len(reply["turn_ids"]) == 2


def test_chat_streams_the_models_tokens(llm_stack: LlmStack) -> None:
    body = {"user_id": new_user(), "session_id": "s1", "message": "Count to five.",
            "stream": True}  # fmt: skip
    events: list[tuple[str, Any]] = []
    with httpx.stream("POST", f"{llm_stack.api_url}/v1/chat", json=body, timeout=300) as response:
        assert response.status_code == 200
        name, data = "message", []
        for line in response.iter_lines():
            if line.startswith("event:"):
                name = line.partition(":")[2].strip()
            elif line.startswith("data:"):
                data.append(line.partition(":")[2].strip())
            elif not line and data:
                events.append((name, json.loads("\n".join(data))))
                name, data = "message", []
    names = [n for n, _ in events]
    assert names[0] == "memories" and names[-1] == "done", names
    tokens = [d["delta"] for n, d in events if n == "token"]
    assert len(tokens) >= 2 and "".join(tokens).strip()
    assert events[-1][1]["model"] == llm_stack.alias


def test_completions_plain(llm_stack: LlmStack) -> None:
    completion = _client(llm_stack).chat.completions.create(
        model=llm_stack.alias,
        messages=[{"role": "user", "content": "Reply with the word: pong"}],
        user=new_user(),
        max_tokens=16,
    )
    assert completion.choices[0].message.content
    assert completion.choices[0].finish_reason in ("stop", "length")


def test_completions_streamed(llm_stack: LlmStack) -> None:
    stream = _client(llm_stack).chat.completions.create(
        model=llm_stack.alias,
        messages=[{"role": "user", "content": "Name three colours."}],
        user=new_user(),
        max_tokens=32,
        stream=True,
    )
    pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
    assert len([p for p in pieces if p]) >= 2 and "".join(pieces).strip()


def test_completions_with_a_tool(llm_stack: LlmStack) -> None:
    completion = _client(llm_stack).chat.completions.create(
        model=llm_stack.alias,
        messages=[{"role": "user", "content": "What is the weather in Lisbon?"}],
        user=new_user(),
        tools=[WEATHER_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=64,
    )
    calls = completion.choices[0].message.tool_calls
    assert calls, completion
    call = calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments).get("city"), str)
