"""A lone surrogate ("\\ud800": legal as a JSON escape, not as UTF-8 text) is refused
by REST, the SDK and MCP (stdio and streamable HTTP) under one rule name, REST's
`string_unicode`, with nothing sent on or stored: the SDK raised a raw
UnicodeEncodeError, and MCP answered with its JSON parser's "unexpected end of hex
escape"."""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp.types import LATEST_PROTOCOL_VERSION

from memwell.agents.transports import RefusingUnsendable
from memwell.sdk import AsyncMemoryClient, InvalidInputError, MemoryClient

RULE = "string_unicode"
LONE = "a\ud800b"
#: Nothing listens here: a call the SDK sent would fail with a TransportError instead.
NOWHERE = "http://127.0.0.1:1"


@pytest.fixture(scope="module")
def rest_rule(api: TestClient, make_key: Callable[..., dict[str, str]]) -> dict[str, Any]:
    """The rule REST names, from its refusal of a search whose query holds one."""
    raw = json.dumps({"user_id": "u-lone", "query": LONE}).encode()  # \\ud800, escaped
    headers = {**make_key("t-lone", ("read",)), "Content-Type": "application/json"}
    response = api.post("/v1/memories/search", content=raw, headers=headers)
    assert response.status_code == 422, response.text
    error: dict[str, Any] = response.json()["errors"][0]
    assert error["type"] == RULE and error["loc"] == ["body", "query"]
    return error


SDK_CALLS: dict[str, Callable[[MemoryClient], object]] = {
    "chat": lambda c: c.chat(user_id="u", session_id="s", message=LONE),
    "chat_stream": lambda c: list(c.chat_stream(user_id="u", session_id="s", message=LONE)),
    "add_turn": lambda c: c.add_turn(user_id="u", session_id="s", content=LONE),
    "add_turns": lambda c: c.add_turns([{"user_id": "u", "session_id": "s", "content": LONE}]),
    "search": lambda c: c.search(user_id="u", query=LONE),
    "context": lambda c: c.context(user_id="u", session_id="s", query=LONE),
    "add_memory": lambda c: c.add_memory(user_id="u", content=LONE),
    "update_memory": lambda c: c.update_memory("m1", content=LONE),
    "get_memory": lambda c: c.get_memory(LONE),
    "erase_user": lambda c: c.erase_user(LONE),
    "list_memories": lambda c: c.list_memories(user_id=LONE),
    "transcript": lambda c: c.transcript(user_id="u", session_id=LONE),
}


@pytest.mark.parametrize("method", sorted(SDK_CALLS))
def test_the_sdk_refuses_it_before_sending_with_rests_rule(
    method: str, rest_rule: dict[str, Any]
) -> None:
    with (
        MemoryClient(NOWHERE, max_retries=0) as client,
        pytest.raises(InvalidInputError) as refused,
    ):
        SDK_CALLS[method](client)
    assert refused.value.status == 422
    error = refused.value.errors[0]
    assert (error["type"], error["msg"]) == (RULE, rest_rule["msg"])
    assert refused.value.type_uri.endswith("/invalid-input")


def test_the_async_sdk_refuses_it_too(rest_rule: dict[str, Any]) -> None:
    async def search() -> None:
        async with AsyncMemoryClient(NOWHERE, max_retries=0) as client:
            await client.search(user_id="u", query=LONE)

    with pytest.raises(InvalidInputError) as refused:
        asyncio.run(search())
    assert refused.value.errors[0]["type"] == RULE
    assert refused.value.errors[0]["loc"] == ["body", "query"]


def _read_answers(
    process: subprocess.Popen[bytes], ids: set[int], timeout: float
) -> dict[int, Any]:
    """The JSON-RPC answers with `ids` from the server's stdout, as they come."""
    assert process.stdout is not None
    answers: dict[int, Any] = {}
    pending = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while not ids <= answers.keys():
            left = deadline - time.monotonic()
            assert left > 0, f"no answer to {ids - answers.keys()} in {timeout} s"
            if not selector.select(left):
                continue
            chunk = os.read(process.stdout.fileno(), 65536)
            assert chunk, "the server closed its stdout"
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in filter(None, lines):
                message = json.loads(line)
                if message.get("id") in ids:
                    answers[message["id"]] = message
    return answers


def test_mcp_over_stdio_answers_with_rests_rule_and_keeps_serving(
    stack_env: dict[str, str], rest_rule: dict[str, Any]
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "memwell", "mcp", "--tenant", "t-lone"],
        env={**stack_env, "MEMWELL_LOG_LEVEL": "WARNING"},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdin is not None
    try:

        def send(message: dict[str, Any]) -> None:
            assert process.stdin is not None
            process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
            process.stdin.flush()

        send({"id": 1, "method": "initialize", "params": {
            "protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}})  # fmt: skip
        _read_answers(process, {1}, timeout=60)
        send({"method": "notifications/initialized"})
        arguments = {"user_id": "u-lone", "content": LONE}
        send(
            {
                "id": 2,
                "method": "tools/call",
                "params": {"name": "remember", "arguments": arguments},
            }
        )
        send({"id": 3, "method": "tools/list"})
        answers = _read_answers(process, {2, 3}, timeout=60)
    finally:
        process.stdin.close()
        process.wait(timeout=30)
    error = answers[2]["error"]
    assert error["data"] == {"type": RULE, "loc": ["arguments", "content"]}
    assert rest_rule["msg"] in error["message"] and "hex escape" not in error["message"]
    assert "remember" in {tool["name"] for tool in answers[3]["result"]["tools"]}


def test_mcp_over_http_answers_with_rests_rule(rest_rule: dict[str, Any]) -> None:
    reached: list[bytes] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        reached.append(body)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def post(body: bytes) -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []
        parts = [body[:10], body[10:]]

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": parts.pop(0), "more_body": bool(parts)}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
        await RefusingUnsendable(app)(scope, receive, send)
        return sent

    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "recall", "arguments": {"user_id": "u", "query": LONE}}}  # fmt: skip
    refused = asyncio.run(post(json.dumps(call).encode()))
    assert refused[0]["status"] == 200 and reached == []
    answer = json.loads(refused[1]["body"])
    assert answer["id"] == 7 and answer["error"]["data"] == {
        "type": RULE,
        "loc": ["arguments", "query"],
    }
    assert rest_rule["msg"] in answer["error"]["message"]

    fine = json.dumps(
        {**call, "params": {"name": "recall", "arguments": {"query": "a\ud83d\ude00"}}}
    )
    passed = asyncio.run(post(fine.encode()))
    assert passed[0]["status"] == 204 and reached == [fine.encode()]
