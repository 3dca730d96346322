"""The model behind the OpenAI-compatible door, spoken to on the wire.

The door forwards the app's own request (tools, tool_choice, temperature, response
formats, whatever a newer API adds) with only its messages changed, so it talks to the
upstream as raw JSON over HTTP instead of through a client library that would drop
what it does not model. Without an upstream, the local recall responder answers in the
same shapes, so the endpoint works offline.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

import httpx

from memwell.llm.base import ModelRequest
from memwell.llm.recall import RecallResponder
from memwell.retrieval.search import MemoryHit

JsonObject = dict[str, Any]


class UpstreamError(Exception):
    """The upstream refused or failed; its status, OpenAI-shaped body and Retry-After
    are passed on to the client as they came."""

    def __init__(self, status: int, body: JsonObject, retry_after: str | None = None) -> None:
        super().__init__(f"upstream answered {status}")
        self.status = status
        self.body = body
        self.retry_after = retry_after


class Upstream(Protocol):
    async def complete(self, body: JsonObject, memories: Sequence[MemoryHit]) -> JsonObject: ...

    def stream(self, body: JsonObject, memories: Sequence[MemoryHit]) -> AsyncIterator[JsonObject]:
        """Chunks of a streamed completion; UpstreamError before the first one."""
        ...

    async def models(self) -> JsonObject: ...

    async def aclose(self) -> None: ...


def error_body(message: str, *, kind: str, code: str | None = None) -> JsonObject:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class HttpUpstream:
    """Any OpenAI-compatible server (OpenAI, vLLM, Ollama, LM Studio)."""

    def __init__(self, *, base_url: str, api_key: str | None, timeout_s: float) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s
        )

    async def complete(self, body: JsonObject, memories: Sequence[MemoryHit]) -> JsonObject:
        try:
            response = await self._http.post("/chat/completions", json=body)
        except httpx.TimeoutException as exc:
            raise _unreachable(504, "the model endpoint timed out") from exc
        except httpx.TransportError as exc:
            raise _unreachable(502, f"the model endpoint is unreachable: {exc}") from exc
        _raise_for(response)
        answer: JsonObject = response.json()
        return answer

    async def stream(
        self, body: JsonObject, memories: Sequence[MemoryHit]
    ) -> AsyncIterator[JsonObject]:
        try:
            async with self._http.stream("POST", "/chat/completions", json=body) as response:
                if response.status_code != 200:
                    await response.aread()
                    _raise_for(response)
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    yield json.loads(data)
        except httpx.TimeoutException as exc:
            raise _unreachable(504, "the model endpoint timed out") from exc
        except httpx.TransportError as exc:
            raise _unreachable(502, f"the model endpoint is unreachable: {exc}") from exc

    async def models(self) -> JsonObject:
        try:
            response = await self._http.get("/models")
        except httpx.TransportError as exc:
            raise _unreachable(502, f"the model endpoint is unreachable: {exc}") from exc
        _raise_for(response)
        listed: JsonObject = response.json()
        return listed

    async def aclose(self) -> None:
        await self._http.aclose()


def _unreachable(status: int, message: str) -> UpstreamError:
    return UpstreamError(status, error_body(message, kind="upstream_error"))


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("error"), dict):
        body = error_body(
            f"the model endpoint answered {response.status_code}", kind="upstream_error"
        )
    raise UpstreamError(response.status_code, body, response.headers.get("retry-after"))


class LocalUpstream:
    """The local recall responder in OpenAI's shapes: no model endpoint configured."""

    model = RecallResponder.name

    def __init__(self) -> None:
        self._responder = RecallResponder()

    async def _text(self, body: JsonObject, memories: Sequence[MemoryHit]) -> str:
        messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
        reply = await self._responder.complete(
            ModelRequest(messages=messages, memories=list(memories))
        )
        return reply.content

    async def complete(self, body: JsonObject, memories: Sequence[MemoryHit]) -> JsonObject:
        text = await self._text(body, memories)
        return {
            "id": _completion_id(), "object": "chat.completion", "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }  # fmt: skip

    async def stream(
        self, body: JsonObject, memories: Sequence[MemoryHit]
    ) -> AsyncIterator[JsonObject]:
        text = await self._text(body, memories)
        base = {"id": _completion_id(), "object": "chat.completion.chunk",
                "created": int(time.time()), "model": self.model}  # fmt: skip
        yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}
        for line in text.splitlines(keepends=True):
            yield {**base, "choices": [{"index": 0, "delta": {"content": line}}]}
        yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
            yield {**base, "choices": [], "usage": usage}

    async def models(self) -> JsonObject:
        return {"object": "list", "data": [{"id": self.model, "object": "model",
                                            "created": 0, "owned_by": "memwell"}]}  # fmt: skip

    async def aclose(self) -> None:
        return None


def _completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex
