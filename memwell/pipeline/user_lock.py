"""The per-(tenant, user) advisory lock that serialises a user's consolidation.

Claiming (memwell/pipeline/claim.py) takes it without waiting, to hold a whole user;
reconcile (memwell/pipeline/reconcile.py) takes it again before it reads neighbours,
which is free when the claim already holds it (advisory locks are re-entrant within
a session). Both are transaction-scoped: committing or rolling back releases them.
"""

from __future__ import annotations

import time

from sqlalchemy import text
from sqlalchemy.orm import Session

_LOCK = text(
    "SELECT pg_advisory_xact_lock(hashtextextended(k, 0))"
    " FROM unnest(CAST(:keys AS text[])) WITH ORDINALITY AS u(k, n) ORDER BY n"
)
_TRY_LOCK = text("SELECT pg_try_advisory_xact_lock(hashtextextended(:key, 0))")
# The keys it could not take at once, in order (each tried exactly once).
_TRY_ALL = text(
    "SELECT k FROM unnest(CAST(:keys AS text[])) WITH ORDINALITY AS u(k, n)"
    " WHERE NOT pg_try_advisory_xact_lock(hashtextextended(k, 0)) ORDER BY n"
)


def lock_key(tenant: str, user_id: str) -> str:
    # The tenant's length first: no (tenant, user) pair can spell another's key.
    return f"memwell:{len(tenant)}:{tenant}:{user_id}"


def try_lock_user(session: Session, tenant: str, user_id: str) -> bool:
    """Take the user's lock if nobody else holds it; never waits."""
    return bool(session.execute(_TRY_LOCK, {"key": lock_key(tenant, user_id)}).scalar())


def lock_users(session: Session, users: set[tuple[str, str]]) -> float:
    """Take the users' locks, waiting for their holders; returns the milliseconds spent
    blocked (0 when every lock was free or already held, as after a worker's claim).

    Each lock is first tried without waiting, in one round trip; only the ones held
    elsewhere are then waited for, in sorted order. A caller holding some users while
    it waits for others can deadlock only with another caller doing the same across
    the same users; Postgres detects that and fails one of them, which retries."""
    keys = [lock_key(tenant, user_id) for tenant, user_id in sorted(users)]
    busy = list(session.scalars(_TRY_ALL, {"keys": keys}).all())
    if not busy:
        return 0.0
    t0 = time.perf_counter()
    session.execute(_LOCK, {"keys": busy}).all()
    return (time.perf_counter() - t0) * 1000.0
