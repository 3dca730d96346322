"""Claim pending turns for consolidation: whole users at a time, in micro-batches.

A worker claims a user by taking that user's reconcile lock without waiting
(memwell/pipeline/user_lock.py), then every pending turn of the user, in arrival
order (seq), up to the batch's room. A user another worker holds is skipped, the way
SKIP LOCKED skips a row. So no two workers ever hold one user: reconcile's lock,
taken again later in the same transaction, is already held and costs no wait, and
workers on different users never queue on each other. A user's turns are applied in
order because only one worker at a time holds the user, and it takes them by seq.

The users of the task's own turns come first; the batch is then topped up with the
users whose pending turns are oldest (the task runs as one tenant under row-level
security, so it only ever sees that tenant's turns). Under a backlog this turns
one-task-per-turn into batches of `limit` for the embedder, and the tasks whose turns
were taken become no-ops.

A user whose turns failed a batch (`error` set, still pending: memwell/pipeline/
isolation.py) is never taken to top up another task's batch, so it cannot sink that
batch again; a task whose own turns are such a user's claims them alone, no top-up.

When the first claim comes back short, `claim_batch` lingers up to `linger_s`,
topping up as turns land, so a turn that arrives just ahead of others (their ingest
tasks still in flight) is not embedded at batch 1: the batch flushes at `limit`
turns or after `linger_s`, whichever comes first. A turn alone pays the linger once.

A task's own turn can land just after another worker claimed its user: skipped, it
would wait for the sweeper. So `Claim.deferred` lists the task's turns still pending
outside the claim; the task claims again for them while it finds other work, and
otherwise sends them a new consolidate task, a moment later, instead of waiting on
the lock (worker/tasks.py). Workers never wait for one another.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from memwell.db.models import Turn
from memwell.pipeline.user_lock import try_lock_user

LINGER_POLL_S = 0.005

# Users with pending turns, oldest pending turn first; ix_turns_pending_by_user answers
# both this and one user's turns in order.
_PENDING_USERS = text(
    """
    SELECT user_id FROM turns
    WHERE tenant = :tenant AND status = 'pending'
    GROUP BY user_id ORDER BY min(seq) LIMIT :n
    """
)
_OWN_USERS = text(
    """
    SELECT user_id FROM turns
    WHERE tenant = :tenant AND id = ANY(CAST(:ids AS text[])) AND status = 'pending'
    GROUP BY user_id ORDER BY min(seq)
    """
)
_OWN_LEFT = text(
    """
    SELECT id FROM turns
    WHERE tenant = :tenant AND id = ANY(CAST(:ids AS text[])) AND status = 'pending'
      AND NOT (id = ANY(CAST(:claimed AS text[])))
    """
)
# Of these users, the ones with turns that failed a batch (still pending, retried alone).
_SUSPECT_USERS = text(
    """
    SELECT DISTINCT user_id FROM turns
    WHERE tenant = :tenant AND user_id = ANY(CAST(:users AS text[]))
      AND status = 'pending' AND error IS NOT NULL
    """
)
# A claim considers this many users beyond the batch's room: enough to step over the
# users other workers hold (at most one batch's worth each).
USER_SLACK = 64


@dataclass
class Claim:
    """The turns a batch holds, in order per user, and what claiming them cost."""

    tenant: str
    turns: list[Turn] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    #: the task's own turns still pending outside this claim (their user was busy)
    deferred: list[str] = field(default_factory=list)
    #: no top-up: the caller asked for none, or its own users' turns failed a batch
    alone: bool = False


def _take_user(session: Session, claim: Claim, user_id: str, room: int) -> None:
    """Claim up to `room` of the user's pending turns, in seq order; the caller holds
    the user's lock. FOR UPDATE without SKIP LOCKED: skipping a row another
    transaction briefly holds (the sweeper) would apply a later turn before it."""
    held = {t.id for t in claim.turns}
    stmt = select(Turn).where(
        Turn.tenant == claim.tenant, Turn.user_id == user_id, Turn.status == "pending"
    )
    if held:
        stmt = stmt.where(Turn.id.not_in(held))
    turns = list(session.scalars(stmt.order_by(Turn.seq).limit(room).with_for_update()).all())
    if turns and user_id not in claim.users:
        claim.users.append(user_id)
    claim.turns += turns


def _fill(session: Session, claim: Claim, users: Collection[str], limit: int) -> None:
    for user_id in users:
        room = limit - len(claim.turns)
        if room <= 0:
            return
        if user_id in claim.users or try_lock_user(session, claim.tenant, user_id):
            _take_user(session, claim, user_id, room)


def _suspects(session: Session, tenant: str, users: list[str]) -> set[str]:
    if not users:
        return set()
    return set(session.scalars(_SUSPECT_USERS, {"tenant": tenant, "users": users}).all())


def claim_pending(session: Session, claim: Claim, *, turn_ids: list[str], limit: int) -> list[str]:
    """Top `claim` up to `limit` turns, the task's own users first, then (unless the
    claim is `alone`) other free users whose turns never failed a batch. Returns the own
    users that were not free."""
    own: list[str] = []
    if turn_ids:
        own = list(session.scalars(_OWN_USERS, {"tenant": claim.tenant, "ids": turn_ids}).all())
        _fill(session, claim, own, limit)
        claim.alone = claim.alone or bool(_suspects(session, claim.tenant, own))
    if not claim.alone and len(claim.turns) < limit:
        found = session.scalars(
            _PENDING_USERS, {"tenant": claim.tenant, "n": limit + USER_SLACK}
        ).all()
        others = [u for u in found if u not in own]
        suspect = _suspects(session, claim.tenant, [u for u in others if u not in claim.users])
        _fill(session, claim, [u for u in others if u not in suspect], limit)
    return [u for u in own if u not in claim.users]


def claim_batch(
    session: Session,
    *,
    tenant: str,
    turn_ids: list[str],
    limit: int,
    linger_s: float,
    top_up: bool = True,
) -> Claim:
    """claim_pending, then top up until `limit` turns or `linger_s` has passed."""
    claim = Claim(tenant, alone=not top_up)
    busy = claim_pending(session, claim, turn_ids=turn_ids, limit=limit)
    if claim.turns and linger_s > 0 and not claim.alone:
        deadline = time.monotonic() + linger_s
        while len(claim.turns) < limit and time.monotonic() < deadline:
            time.sleep(LINGER_POLL_S)
            claim_pending(session, claim, turn_ids=[], limit=limit)
    if turn_ids and (busy or len(claim.turns) == limit):
        claim.deferred = list(
            session.scalars(
                _OWN_LEFT,
                {"tenant": tenant, "ids": turn_ids, "claimed": [t.id for t in claim.turns]},
            ).all()
        )
    return claim
