"""A session clear's fence: the session's turns acknowledged before the clear but not
yet stored are dropped when they arrive, so a cleared session stays cleared.

Every turn the chat path or `enqueue_turns` acknowledges is in the Redis inbox until a
worker has committed it (memwell/intake/redis_inbox.py), in the same MULTI as its
broker message. So the session's turns in the inbox, read while the clear holds the
user's lock exclusively, are exactly those acknowledged before the clear and still in
flight: queued, held unacknowledged by a worker, or waiting on the lock to be
persisted. The clear records them as dropped (memwell/intake/dropped_turns.py), and
the ingest step, under the same lock, drops a recorded turn. A turn acknowledged
after the clear is not in the set, so a session can be reused at once. Turns sent
through POST /v1/turns are stored before they are acknowledged, so the clear deletes
their rows instead (and records those as dropped too, memwell/intake/dropped_turns.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from memwell.core import stack
from memwell.core.settings import get_settings
from memwell.intake import redis_inbox, task_message
from memwell.intake.dropped_turns import SESSION_CLEARED, record_dropped


async def fence_in_flight(
    session: AsyncSession,
    *,
    tenant: str,
    user_id: str,
    session_id: str,
    turn_ids: Sequence[str] = (),
) -> int:
    """Record the session's in-flight turns (only those of `turn_ids`, when given) as
    dropped; call under the user's exclusive lock, before the commit. Returns how many."""
    url = stack.redis_url(get_settings())
    if not task_message.supports(url):
        return 0  # no inbox on this broker: nothing to read the in-flight turns from
    broker = task_message.publisher(url).client
    found = await asyncio.to_thread(
        redis_inbox.in_flight_turn_ids, broker, tenant=tenant, user_id=user_id,
        session_id=session_id,
    )  # fmt: skip
    if turn_ids:
        found &= set(turn_ids)
    await session.run_sync(
        lambda s: record_dropped(s, tenant=tenant, turn_ids=found, reason=SESSION_CLEARED)
    )
    return len(found)
