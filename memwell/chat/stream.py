"""The chat path, streamed: the same reads and assembly as `chat`, the reply as the model
produces it, then the same remembering.

Events, in order: the memories used, the reply's text deltas, then `DoneEvent` (the
exchange is remembered) or `ErrorEvent` (the model broke off; what it had said, if
anything, is remembered marked truncated). A consumer that stops early, because its
client hung up, leaves what was produced remembered once, marked truncated.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, replace

from memwell.chat.exchange import Exchange, remember_exchange
from memwell.chat.service import ChatDeps, count_model_call, gather_context
from memwell.core.background import spawn
from memwell.core.errors import MemwellError
from memwell.core.metrics import observe_chat_timings
from memwell.core.timing import Stopwatch
from memwell.intake.turns import new_turn_id
from memwell.llm import ModelRequest
from memwell.llm.base import StreamUsage
from memwell.retrieval.search import MemoryHit


@dataclass(frozen=True)
class MemoriesEvent:
    memories: list[MemoryHit]


@dataclass(frozen=True)
class TokenEvent:
    delta: str


@dataclass(frozen=True)
class DoneEvent:
    turn_ids: list[str]
    model: str
    timings_ms: dict[str, float]


@dataclass(frozen=True)
class ErrorEvent:
    error: MemwellError
    #: the truncated exchange, when the model had said something before it failed
    turn_ids: list[str]


ChatEvent = MemoriesEvent | TokenEvent | DoneEvent | ErrorEvent


@dataclass
class _Reply:
    """What one stream has produced, and whether it was handed to be remembered."""

    deps: ChatDeps
    exchange: Exchange
    watch: Stopwatch
    parts: list[str]
    remembered: bool = False

    def remember(self, *, truncated: bool) -> asyncio.Task[list[str]]:
        """Remember the exchange, once, in a task of its own: it completes even when
        the stream is being cancelled."""
        self.remembered = True
        exchange = replace(
            self.exchange,
            reply="".join(self.parts),
            reply_metadata={"truncated": True} if truncated else None,
        )
        return spawn(
            remember_exchange(
                buffer=self.deps.buffer, send=self.deps.send, summarize=self.deps.summarize,
                exchange=exchange, watch=self.watch, dead_letter=self.deps.dead_letter,
            ),
            what="remembering a streamed chat",
        )  # fmt: skip


async def chat_stream(
    deps: ChatDeps, *, tenant: str, user_id: str, session_id: str, message: str
) -> AsyncGenerator[ChatEvent, None]:
    """Answer one user message as events, then remember the exchange."""
    watch = Stopwatch()
    t0 = time.perf_counter()
    context = await gather_context(
        deps, tenant=tenant, user_id=user_id, session_id=session_id, message=message, watch=watch
    )
    yield MemoriesEvent(memories=context.memories)

    # Ids made now: the turns are the same whichever path ends up writing them.
    exchange = Exchange(
        tenant=tenant, user_id=user_id, session_id=session_id, message=message, reply="",
        turn_ids=(new_turn_id(), new_turn_id()),
    )  # fmt: skip
    reply = _Reply(deps=deps, exchange=exchange, watch=watch, parts=[])
    usage = StreamUsage(model=deps.model.name)
    deltas = deps.model.stream(
        ModelRequest(messages=context.messages, memories=context.memories), usage
    )
    started = time.perf_counter()
    failure: MemwellError | None = None
    turn_ids: list[str] = []
    try:
        try:
            async for delta in deltas:
                if delta:
                    if not reply.parts:
                        watch.lap("first_token", started)
                    reply.parts.append(delta)
                    yield TokenEvent(delta=delta)
        except MemwellError as exc:
            failure = exc
        watch.lap("model", started)
        if failure is None or reply.parts:
            turn_ids = await asyncio.shield(reply.remember(truncated=failure is not None))
    finally:
        # Reached early when the consumer stopped (closed or cancelled): no await may
        # come before this write is under way.
        if reply.parts and not reply.remembered:
            reply.remember(truncated=True)
        count_model_call(
            deps, tenant=tenant, prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens, ok=failure is None,
        )  # fmt: skip
        await _close(deltas)
    if failure is not None:
        yield ErrorEvent(error=failure, turn_ids=turn_ids)
        return
    watch.lap("total", t0)
    observe_chat_timings(watch.timings)
    yield DoneEvent(turn_ids=turn_ids, model=usage.model, timings_ms=watch.timings)


async def _close(deltas: AsyncIterator[str]) -> None:
    """A model's stream left suspended holds its connection to the endpoint until it is
    collected; close it now."""
    if isinstance(deltas, AsyncGenerator):
        await deltas.aclose()
