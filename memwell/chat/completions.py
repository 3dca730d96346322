"""The OpenAI-compatible door: an app keeps its own chat loop and its `openai` client,
points `base_url` at Memwell, and gets memory.

Before forwarding, the app's messages gain one system message: the user's memories
and the session's running summary, quoted as data (the same assembly and token budget
as /v1/context). The app's own system prompt, history, tools and options pass through
untouched. After the reply (or, for a stream, its end or the client's disconnect), the
user's last message and the reply are remembered like any chat exchange. A request
that produced no reply writes nothing; one retried with the same idempotency key is
remembered once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from memwell.buffer.session_buffer import SessionBuffer
from memwell.chat.assembly import assemble_context, render_data_block
from memwell.chat.exchange import DeadLetter, Exchange, remember_exchange
from memwell.core.background import spawn
from memwell.core.errors import InvalidInput
from memwell.intake.turns import IngestPayload
from memwell.llm.upstream import JsonObject, Upstream
from memwell.retrieval.search import MemoryHit
from memwell.retrieval.service import RetrievalDeps, retrieve

#: How long a client's idempotency key keeps a retried request from being remembered twice.
IDEMPOTENCY_TTL_S = 24 * 3600
_LEADING_ROLES = ("system", "developer")


@dataclass
class CompletionsDeps:
    retrieval: RetrievalDeps
    buffer: SessionBuffer
    upstream: Upstream
    redis: aioredis.Redis
    send: Callable[[IngestPayload], Awaitable[None]]
    summarize: Callable[[str, str, str, list[str]], Coroutine[Any, Any, None]] | None
    context_budget: int
    #: keeps an exchange that could not be sent, for replay
    dead_letter: DeadLetter | None = None


@dataclass(frozen=True)
class Caller:
    tenant: str
    user_id: str
    session_id: str
    idempotency_key: str | None = None


@dataclass(frozen=True)
class Prepared:
    body: JsonObject
    memories: list[MemoryHit]
    message: str


def text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of a content-part array."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def last_user_message(messages: Sequence[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            text = text_of(message.get("content")).strip()
            if text:
                return text
    raise InvalidInput(
        "the user's message must not be blank: messages hold no user message with text"
    )


def inject(messages: Sequence[Any], data_block: str) -> list[Any]:
    """The messages with the memory block after the app's own leading system messages."""
    at = 0
    while at < len(messages) and isinstance(messages[at], dict):
        if messages[at].get("role") not in _LEADING_ROLES:
            break
        at += 1
    block = {"role": "system", "content": data_block}
    return [*messages[:at], block, *messages[at:]]


async def prepare(deps: CompletionsDeps, caller: Caller, body: JsonObject) -> Prepared:
    """The request as forwarded: memories and summary injected as quoted data."""
    message = last_user_message(body.get("messages") or [])
    hits, snapshot = await asyncio.gather(
        retrieve(deps.retrieval, tenant=caller.tenant, user_id=caller.user_id, query=message),
        deps.buffer.read(caller.tenant, caller.user_id, caller.session_id),
    )
    # The app sends its own history: only memories and the summary go in, trimmed to
    # the same budget as /v1/context.
    context = assemble_context(
        message=message, memories=hits, summary=snapshot.summary, recent=[],
        budget=deps.context_budget,
    )  # fmt: skip
    if not context.memories and not snapshot.summary:
        return Prepared(body=body, memories=[], message=message)  # nothing to add
    block = render_data_block(context.memories, snapshot.summary)
    forwarded = {**body, "messages": inject(body["messages"], block)}
    return Prepared(body=forwarded, memories=context.memories, message=message)


def reply_text(message: Any) -> str:
    """What the assistant said; a reply that only calls tools is remembered by name."""
    if not isinstance(message, dict):
        return ""
    text = text_of(message.get("content"))
    calls = [c.get("function", {}).get("name") for c in message.get("tool_calls") or []]
    if not text and calls:
        return "(called tools: " + ", ".join(str(c) for c in calls) + ")"
    return text


async def complete(deps: CompletionsDeps, caller: Caller, body: JsonObject) -> JsonObject:
    """Forward one completion and remember the exchange; the upstream's answer."""
    prepared = await prepare(deps, caller, body)
    answer = await deps.upstream.complete(prepared.body, prepared.memories)
    choices = answer.get("choices") or [{}]
    await _remember(deps, caller, prepared.message, reply_text(choices[0].get("message")))
    return answer


async def open_stream(
    deps: CompletionsDeps, caller: Caller, body: JsonObject
) -> AsyncGenerator[bytes, None]:
    """Server-sent events of the upstream's stream. The first chunk is awaited here, so
    an upstream refusal is raised before any byte is sent (with its own status)."""
    prepared = await prepare(deps, caller, body)
    chunks = deps.upstream.stream(prepared.body, prepared.memories)
    first = await anext(chunks, None)
    return _relay(deps, caller, prepared.message, first, chunks)


async def _relay(
    deps: CompletionsDeps,
    caller: Caller,
    message: str,
    first: JsonObject | None,
    chunks: AsyncIterator[JsonObject],
) -> AsyncGenerator[bytes, None]:
    parts: list[str] = []
    handed_over = False
    try:
        chunk = first
        while chunk is not None:
            for choice in chunk.get("choices") or []:
                parts.append(reply_text(choice.get("delta")))
            yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
            chunk = await anext(chunks, None)
        # Stored before the stream ends, so its last event can say if that failed. A
        # task of its own: the write outlives a client that hangs up now.
        handed_over = True
        stored = spawn(
            _remember(deps, caller, message, "".join(parts)), what="remembering a streamed exchange"
        )
        try:
            await asyncio.shield(stored)
        except Exception:  # reported here; remember_exchange dead-lettered it
            yield b"data: " + json.dumps(NOT_REMEMBERED).encode() + b"\n\n"
        yield b"data: [DONE]\n\n"
    finally:
        reply = "".join(parts)
        if reply and not handed_over:
            # The client went away, or the model broke off: what it said is kept.
            spawn(
                _remember(deps, caller, message, reply, {"truncated": True}),
                what="remembering a streamed exchange",
            )


#: The stream's last event when its exchange could not be stored (it went to a dead
#: letter): OpenAI's clients raise a chunk with an `error` member as an APIError.
NOT_REMEMBERED: JsonObject = {
    "error": {
        "message": "the reply was streamed but the exchange could not be stored; it was "
        "kept as a dead letter for replay",
        "type": "not-remembered",
        "param": None,
        "code": "not-remembered",
    }
}


async def _remember(
    deps: CompletionsDeps,
    caller: Caller,
    message: str,
    reply: str,
    reply_metadata: dict[str, Any] | None = None,
) -> None:
    turn_ids = None
    if caller.idempotency_key:
        digest = hashlib.sha256(f"{caller.tenant}\0{caller.idempotency_key}".encode()).hexdigest()[
            :32
        ]
        first_time = await deps.redis.set(f"mw:idem:{digest}", "1", nx=True, ex=IDEMPOTENCY_TTL_S)
        if not first_time:
            return
        turn_ids = (f"oai-{digest}-u", f"oai-{digest}-a")
    await remember_exchange(
        buffer=deps.buffer,
        send=deps.send,
        summarize=deps.summarize,
        dead_letter=deps.dead_letter,
        exchange=Exchange(
            tenant=caller.tenant, user_id=caller.user_id, session_id=caller.session_id,
            message=message, reply=reply, turn_ids=turn_ids, reply_metadata=reply_metadata,
        ),
    )  # fmt: skip
