"""The thin chat path: buffer + retrieval concurrently, assemble, answer, remember.

Nothing expensive happens here besides the model call: consolidation (importance,
extraction, dedup, embedding of the new turns) is enqueued to the workers. The
streamed answer (memwell/chat/stream.py) shares the reads and the assembly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from memwell.buffer.session_buffer import BufferSnapshot, SessionBuffer
from memwell.chat.assembly import AssembledContext, assemble_context
from memwell.chat.exchange import DeadLetter, Exchange, remember_exchange
from memwell.core.metrics import observe_chat_timings, record_llm_call
from memwell.core.settings import Settings
from memwell.core.timing import Stopwatch
from memwell.intake.turns import IngestPayload
from memwell.llm import ChatModel, ModelRequest
from memwell.retrieval.search import MemoryHit
from memwell.retrieval.service import RetrievalDeps, retrieve


@dataclass
class ChatDeps:
    """What the chat path needs; built once per API process."""

    settings: Settings
    retrieval: RetrievalDeps
    buffer: SessionBuffer
    model: ChatModel
    #: takes an exchange's turns to the workers (the broker, or the Postgres outbox)
    send: Callable[[IngestPayload], Awaitable[None]]
    #: (tenant, user_id, session_id, evicted turn ids): feeds the running summary
    summarize: Callable[[str, str, str, list[str]], Coroutine[Any, Any, None]] | None = None
    #: keeps an exchange that could not be sent, for replay
    dead_letter: DeadLetter | None = None


@dataclass
class ChatResult:
    reply: str
    model: str
    memories: list[MemoryHit]
    turn_ids: list[str]
    timings_ms: dict[str, float] = field(default_factory=dict)


async def gather_context(
    deps: ChatDeps,
    *,
    tenant: str,
    user_id: str,
    session_id: str,
    message: str,
    watch: Stopwatch,
) -> AssembledContext:
    """Read the session buffer and retrieve memories concurrently; assemble them and the
    message inside the token budget."""

    async def read_buffer() -> BufferSnapshot:
        started = time.perf_counter()
        snapshot = await deps.buffer.read(tenant, user_id, session_id)
        watch.lap("buffer", started)
        return snapshot

    snapshot, hits = await asyncio.gather(
        read_buffer(),
        retrieve(deps.retrieval, tenant=tenant, user_id=user_id, query=message, watch=watch),
    )
    started = time.perf_counter()
    context = assemble_context(
        message=message,
        memories=hits,
        summary=snapshot.summary,
        recent=snapshot.turns,
        budget=deps.settings.context_token_budget,
    )
    watch.lap("assemble", started)
    return context


def count_model_call(
    deps: ChatDeps, *, tenant: str, prompt_tokens: int, completion_tokens: int, ok: bool = True
) -> None:
    """Count one call to the model endpoint (the local recall responder is no model)."""
    if deps.settings.llm_mode:
        record_llm_call(
            stage="chat", tenant=tenant, prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens, ok=ok,
        )  # fmt: skip


async def chat(
    deps: ChatDeps, *, tenant: str, user_id: str, session_id: str, message: str
) -> ChatResult:
    """Answer one user message with both memory tiers, then remember the exchange."""
    watch = Stopwatch()
    t0 = time.perf_counter()
    context = await gather_context(
        deps, tenant=tenant, user_id=user_id, session_id=session_id, message=message, watch=watch
    )
    started = time.perf_counter()
    reply = await deps.model.complete(
        ModelRequest(messages=context.messages, memories=context.memories)
    )
    watch.lap("model", started)
    count_model_call(
        deps, tenant=tenant, prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
    )  # fmt: skip

    turn_ids = await remember_exchange(
        buffer=deps.buffer,
        send=deps.send,
        summarize=deps.summarize,
        dead_letter=deps.dead_letter,
        exchange=Exchange(
            tenant=tenant, user_id=user_id, session_id=session_id, message=message,
            reply=reply.content,
        ),
        watch=watch,
    )  # fmt: skip
    watch.lap("total", t0)
    observe_chat_timings(watch.timings)
    return ChatResult(
        reply=reply.content,
        model=reply.model,
        memories=context.memories,
        turn_ids=turn_ids,
        timings_ms=watch.timings,
    )
