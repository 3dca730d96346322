"""Postgres as the source of truth for turns the API accepts (a transactional outbox).

The API persists a batch as `pending` turns and only then answers; the consolidate
dispatch goes to the broker afterwards. If that send fails, or Redis later loses the
message (a crash inside the AOF fsync window, a wiped broker), the turn is still in
Postgres and the sweeper re-dispatches it. So an API acknowledgement survives any
Redis loss. `enqueue_turn` (broker only, no database) cannot do this: its durability
is Redis's (AOF, and the inbox in memwell/intake/redis_inbox.py; see README).
"""

from __future__ import annotations

import logging

import sqlalchemy.exc
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.errors import ServiceUnavailable
from memwell.core.logs import current_request_id
from memwell.core.queues import Queue, TaskName, kombu_queues, pipeline_queue
from memwell.core.settings import get_settings
from memwell.intake.enqueue import producer_app
from memwell.intake.turns import IngestPayload
from memwell.pipeline.persist import persist_turns

log = logging.getLogger(__name__)

#: Turns per consolidate task: one embedder batch.
DISPATCH_CHUNK = 64


def dispatch_consolidation(tenant: str, turn_ids: list[str], *, broker_url: str) -> None:
    """Send one consolidate task for these (already persisted) turns, by task name."""
    producer_app(broker_url).send_task(
        TaskName.CONSOLIDATE_TURNS,
        kwargs={"tenant": tenant, "turn_ids": turn_ids},
        queue=pipeline_queue(get_settings().pipeline_uses_llm, local=Queue.EMBED),
        # The API's request id, so the worker's log lines for these turns carry it.
        headers={"request_id": current_request_id() or ""},
    )


def declare_queues(broker_url: str) -> None:
    """(Re)declare every Memwell queue and its binding on the broker.

    Kombu's Redis transport routes by binding keys kept in Redis itself; a Redis that
    lost its data (no AOF, a wipe) also lost them, and publishes are then silently
    routed nowhere until some process declares the queues again. The sweeper calls
    this before re-dispatching, so it repairs the routing it relies on."""
    with producer_app(broker_url).connection_for_write() as conn:
        channel = conn.default_channel
        for queue in kombu_queues():
            queue.bind(channel).declare()


def accept_turns(
    sessions: sessionmaker[Session], payload: IngestPayload, *, broker_url: str
) -> None:
    """Persist the turns (this commit is the acknowledgement), then dispatch them.

    Raises if Postgres cannot take them, so the caller answers with an error and the
    client retries with the same ids. A failed dispatch is only logged: the turns are
    safe, and the sweeper dispatches them after MEMWELL_SWEEP_AFTER_S.
    """
    try:
        with sessions.begin() as session:
            persist_turns(session, payload)
    except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError) as exc:
        # Not acknowledged: the client sees 503 and resends (same ids, no duplicates).
        raise ServiceUnavailable("the turn store is unavailable; retry later") from exc
    ids = [t.id for t in payload.turns]
    try:
        for start in range(0, len(ids), DISPATCH_CHUNK):
            dispatch_consolidation(
                payload.tenant, ids[start : start + DISPATCH_CHUNK], broker_url=broker_url
            )
    except Exception:  # any broker failure: the sweeper owns these turns now
        log.warning("dispatch of %d accepted turns failed; the sweeper will retry", len(ids))
