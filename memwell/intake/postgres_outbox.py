"""Postgres as the source of truth for turns the API accepts (a transactional outbox).

The API persists a batch as `pending` turns and only then answers; the consolidate
dispatch goes to the broker afterwards. If that send fails, or Redis later loses the
message (a crash inside the AOF fsync window, a wiped broker), the turn is still in
Postgres and the sweeper re-dispatches it. So an API acknowledgement survives any
Redis loss. `enqueue_turn` (broker only, no database) cannot do this: its durability
is Redis's (AOF, and the inbox in memwell/intake/redis_inbox.py; see docs/durability.md).
"""

from __future__ import annotations

import logging

import sqlalchemy.exc
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.errors import ServiceUnavailable
from memwell.intake.dispatch import send_consolidate
from memwell.intake.persist import persist_turns
from memwell.intake.turns import IngestPayload

log = logging.getLogger(__name__)

#: Turns per consolidate task: one embedder batch.
DISPATCH_CHUNK = 64


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
            send_consolidate(
                payload.tenant, ids[start : start + DISPATCH_CHUNK], broker_url=broker_url
            )
    except Exception:  # any broker failure: the sweeper owns these turns now
        log.warning("dispatch of %d accepted turns failed; the sweeper will retry", len(ids))
