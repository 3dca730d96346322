"""A session's newest stored turns, for the context's recent turns when the Redis buffer
lacks them.

Only the chat path appends to the buffer: turns sent through POST /v1/turns or
`enqueue_turns`, and every turn after a Redis restart, exist only in Postgres. The
context reads both and merges them by turn id (the buffer's copy wins). When the
session has a running summary, stored turns older than the buffer's oldest turn were
evicted into it and stay out, so the prompt keeps "summary of older turns + recent
turns verbatim" instead of saying the same thing twice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from memwell.buffer.session_buffer import BufferedTurn, BufferSnapshot
from memwell.db.read_pool import TenantReadPool

#: enough to fill any sensible context budget; the assembly trims the oldest first
STORED_TURNS_LIMIT: Final = 50
# On the turns' (tenant, user_id, session_id, created_at) index. Through the request
# path's read pool, as the tenant, in one round trip (an ORM session took a checkout,
# BEGIN, the tenant's settings, the query and a ROLLBACK, and more CPU than the search).
_NEWEST = (
    "SELECT id, role, content, created_at, token_count, seq FROM turns"
    " WHERE tenant = %(tenant)s AND user_id = %(user_id)s AND session_id = %(session_id)s"
    " ORDER BY created_at DESC, seq DESC LIMIT %(limit)s"
)


@dataclass(frozen=True)
class StoredTurn:
    """A stored turn in the buffer's shape, with its place in the session's order."""

    turn: BufferedTurn
    at: datetime
    seq: int


async def newest_stored_turns(
    reads: TenantReadPool,
    *,
    tenant: str,
    user_id: str,
    session_id: str,
    limit: int = STORED_TURNS_LIMIT,
) -> list[StoredTurn]:
    """The session's `limit` newest turns, oldest first."""
    binds = {"tenant": tenant, "user_id": user_id, "session_id": session_id, "limit": limit}
    rows = await reads.fetch_all(tenant, [(_NEWEST, binds)])
    return [
        StoredTurn(
            turn=BufferedTurn(
                turn_id=turn_id, role=role, content=content, created_at=at.isoformat(),
                tokens=tokens,
            ),
            at=at,
            seq=seq,
        )
        for turn_id, role, content, at, tokens, seq in reversed(rows)
    ]  # fmt: skip


def _instant(turn: BufferedTurn) -> datetime:
    when = datetime.fromisoformat(turn.created_at)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def merge_recent(snapshot: BufferSnapshot, stored: Sequence[StoredTurn]) -> list[BufferedTurn]:
    """The buffer's turns and the stored turns it lacks, each once, oldest first: by
    event time, then arrival order; a turn not stored yet sorts after the stored ones
    of its instant, in buffer order."""
    by_id = {s.turn.turn_id: s for s in stored}
    keyed: list[tuple[tuple[datetime, float, int], BufferedTurn]] = []
    for position, turn in enumerate(snapshot.turns):
        twin = by_id.pop(turn.turn_id, None)
        key = (twin.at, float(twin.seq), 0) if twin else (_instant(turn), math.inf, position)
        keyed.append((key, turn))
    oldest = min((_instant(t) for t in snapshot.turns), default=None)
    for s in by_id.values():
        if snapshot.summary is None or oldest is None or s.at >= oldest:
            keyed.append(((s.at, float(s.seq), 0), s.turn))
    keyed.sort(key=lambda pair: pair[0])
    return [turn for _, turn in keyed]
