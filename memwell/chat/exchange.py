"""Remember one exchange: the user's message and the reply, into the session buffer and
onto the consolidation queue. Every door that answers (the chat path, its stream, the
OpenAI-compatible endpoint) writes through here, so they remember alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memwell.buffer.session_buffer import SessionBuffer
from memwell.core.background import spawn
from memwell.core.logs import current_request_id
from memwell.core.timing import Stopwatch
from memwell.intake.turns import IngestPayload, TurnIn, new_turn_id


@dataclass(frozen=True)
class Exchange:
    tenant: str
    user_id: str
    session_id: str
    message: str
    reply: str
    #: stable ids (from a client's idempotency key) make a retried request harmless
    turn_ids: tuple[str, str] | None = None
    #: kept with the assistant's turn, e.g. {"truncated": True} for a cut-off stream
    reply_metadata: dict[str, Any] | None = None


async def remember_exchange(
    *,
    buffer: SessionBuffer,
    send: Callable[[IngestPayload], Awaitable[None]],
    summarize: Callable[[str, str, str, list[str]], Coroutine[Any, Any, None]] | None,
    exchange: Exchange,
    watch: Stopwatch | None = None,
) -> list[str]:
    """Append both turns to the buffer and enqueue them; returns their turn ids."""
    e = exchange
    now = datetime.now(UTC)
    user_id, assistant_id = e.turn_ids or (new_turn_id(), new_turn_id())
    turns = [
        TurnIn(
            id=user_id, user_id=e.user_id, session_id=e.session_id, role="user",
            content=e.message, created_at=now,
        ),
        TurnIn(
            id=assistant_id, user_id=e.user_id, session_id=e.session_id, role="assistant",
            content=e.reply or "(empty reply)", created_at=now,
            metadata=e.reply_metadata or {},
        ),
    ]  # fmt: skip
    payload = IngestPayload(tenant=e.tenant, turns=turns, request_id=current_request_id())
    buffered = [
        buffer.make_turn(turn_id=t.id, role=t.role, content=t.content, created_at=now.isoformat())
        for t in turns
    ]
    watch = watch or Stopwatch()
    # Two independent writes, each its own round trip: neither waits for the other.
    evicted, _ = await asyncio.gather(
        watch.timed("buffer_append", buffer.append(e.tenant, e.user_id, e.session_id, buffered)),
        watch.timed("enqueue", send(payload)),
    )
    if evicted and summarize is not None:
        # After the ingest of this exchange (the worker retries until the evicted turns
        # are stored, so the order only saves a retry), and not awaited: the summary is
        # derived data, which close-idle rebuilds from the stored turns anyway, so the
        # reply does not wait for it.
        ids = [t.turn_id for t in evicted]
        spawn(
            summarize(e.tenant, e.user_id, e.session_id, ids),
            what=f"the summary request for {len(ids)} evicted turns",
        )
    return [user_id, assistant_id]
