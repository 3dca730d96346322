"""Remember one exchange: the user's message and the reply, into the session buffer and
onto the consolidation queue. Every door that answers (the chat path, its stream, the
OpenAI-compatible endpoint) writes through here, so they remember alike.

The user's message was validated at the door, before the model ran. The reply is the
model's: whatever it holds is made storable here (cut to the content limit, what the
doors' text rule refuses replaced), and marked so, rather than refused after the fact. An exchange
that cannot be sent goes to a dead letter, which `memwell dlq replay` sends again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memwell.buffer.session_buffer import SessionBuffer
from memwell.core.background import after_reply
from memwell.core.logs import current_request_id
from memwell.core.redaction import describe
from memwell.core.text_rules import REFUSED_CHARACTERS
from memwell.core.timing import Stopwatch
from memwell.intake.turns import MAX_CONTENT_CHARS, IngestPayload, TurnIn, new_turn_id

#: (payload, why): keeps an exchange that could not be sent, for replay.
DeadLetter = Callable[[IngestPayload, str], Awaitable[None]]


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


def storable_reply(reply: str) -> tuple[str, dict[str, Any]]:
    """A model's reply as a turn can hold it, and what was changed to make it so."""
    notes: dict[str, Any] = {}
    cleaned = REFUSED_CHARACTERS.sub("\ufffd", reply)
    if cleaned != reply:
        notes["replaced_characters"] = sum(1 for a, b in zip(reply, cleaned, strict=True) if a != b)
    if len(cleaned) > MAX_CONTENT_CHARS:
        notes["cut_from_chars"] = len(cleaned)
        cleaned = cleaned[:MAX_CONTENT_CHARS]
    return (cleaned if cleaned.strip() else "(empty reply)"), notes


async def remember_exchange(
    *,
    buffer: SessionBuffer,
    send: Callable[[IngestPayload], Awaitable[None]],
    summarize: Callable[[str, str, str, list[str]], Coroutine[Any, Any, None]] | None,
    exchange: Exchange,
    watch: Stopwatch | None = None,
    dead_letter: DeadLetter | None = None,
) -> list[str]:
    """Append both turns to the buffer and enqueue them; returns their turn ids. If
    they cannot be written, the exchange goes to `dead_letter` and the error is raised
    for the door to report."""
    e = exchange
    now = datetime.now(UTC)
    user_id, assistant_id = e.turn_ids or (new_turn_id(), new_turn_id())
    reply, notes = storable_reply(e.reply)
    turns = [
        TurnIn(
            id=user_id, user_id=e.user_id, session_id=e.session_id, role="user",
            content=e.message, created_at=now,
        ),
        TurnIn(
            id=assistant_id, user_id=e.user_id, session_id=e.session_id, role="assistant",
            content=reply, created_at=now, metadata={**(e.reply_metadata or {}), **notes},
        ),
    ]  # fmt: skip
    payload = IngestPayload(tenant=e.tenant, turns=turns, request_id=current_request_id())
    buffered = [
        buffer.make_turn(turn_id=t.id, role=t.role, content=t.content, created_at=now.isoformat())
        for t in turns
    ]
    watch = watch or Stopwatch()
    try:
        # Two independent writes, each its own round trip: neither waits for the other.
        evicted, _ = await asyncio.gather(
            watch.timed(
                "buffer_append", buffer.append(e.tenant, e.user_id, e.session_id, buffered)
            ),
            watch.timed("enqueue", send(payload)),
        )
    except Exception as exc:
        if dead_letter is not None:
            # Replaying is harmless if one of the two writes did land: turn ids are keys.
            await dead_letter(payload, describe(exc))
        raise
    if evicted and summarize is not None:
        # After the ingest of this exchange (the worker retries until the evicted turns
        # are stored, so the order only saves a retry), and not awaited: the summary is
        # derived data, which close-idle rebuilds from the stored turns anyway, so the
        # reply does not wait for it, nor share the loop with it.
        ids = [t.turn_id for t in evicted]
        after_reply(
            summarize(e.tenant, e.user_id, e.session_id, ids),
            what=f"the summary request for {len(ids)} evicted turns",
        )
    return [user_id, assistant_id]
