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


def lock_key(tenant: str, user_id: str) -> str:
    # The tenant's length first: no (tenant, user) pair can spell another's key.
    return f"memwell:{len(tenant)}:{tenant}:{user_id}"


def try_lock_user(session: Session, tenant: str, user_id: str) -> bool:
    """Take the user's lock if nobody else holds it; never waits."""
    return bool(session.execute(_TRY_LOCK, {"key": lock_key(tenant, user_id)}).scalar())


def lock_users(session: Session, users: set[tuple[str, str]]) -> float:
    """Take the users' locks in sorted order (no deadlocks), in one round trip, waiting
    for their holders; returns the milliseconds it took."""
    t0 = time.perf_counter()
    keys = [lock_key(tenant, user_id) for tenant, user_id in sorted(users)]
    session.execute(_LOCK, {"keys": keys}).all()
    return (time.perf_counter() - t0) * 1000.0
