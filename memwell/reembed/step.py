"""One step task's work: batches until a time budget is spent, whatever the phase.

Phases, by the migration's state:
- running: walk batches, switching the users each completes; once walked, switch the
  stragglers; none left: `ready` (waiting for `finish`);
- aborting: switch every switched user back, then drop the target's vectors: `aborted`;
- finished, grace over: drop the previous models' vectors.

A step runs only while its token is the migration's (`step_token`): a redelivered
or superseded task does nothing. The next step's token is stored in the same
transaction that sends it, so exactly one chain continues.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine, func, text
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.metrics import REEMBED_MEMORIES_TOTAL
from memwell.db.models import EmbeddingMigration
from memwell.reembed.routing import ROUTES_TTL_S
from memwell.reembed.scope import scope_sql
from memwell.reembed.specs import EmbedderCache, TargetSpec
from memwell.reembed.switch import ensure_target_index, switch_back_user, switch_user
from memwell.reembed.walk import (
    User,
    lock_migration,
    stragglers,
    switched_back_pending,
    walk_batch,
)

log = logging.getLogger(__name__)

#: No user switches sooner after a start: every searching process knows of it first.
SWITCH_AFTER_S = 2 * ROUTES_TTL_S
DROP_BATCH = 5000

Dispatch = Callable[[int, str], None]


@dataclass
class StepContext:
    sessions: sessionmaker[Session]
    engine: Engine
    embedders: EmbedderCache
    ann_threshold: int
    now: Callable[[], datetime] = lambda: datetime.now(UTC)


def target_of(m: EmbeddingMigration) -> TargetSpec:
    provider, _, model = m.target_spec.partition(":")
    return TargetSpec(provider=provider, model=model, base_url=m.target_base_url)


def _still(ctx: StepContext, migration_id: int, token: str, states: tuple[str, ...]) -> bool:
    with ctx.sessions.begin() as session:
        m = lock_migration(session, migration_id)
        return m is not None and m.step_token == token and m.state in states


def _switch(ctx: StepContext, m: EmbeddingMigration, token: str, user: User) -> bool:
    """Switch one user, under the migration's lock, unless it left `running`."""
    embedder = ctx.embedders.get(target_of(m))
    ensure_target_index(
        ctx.engine,
        tenant=user[0],
        user_id=user[1],
        model=m.target_model,
        dims=m.target_dims,
        threshold=ctx.ann_threshold,
    )
    with ctx.sessions.begin() as session:
        locked = lock_migration(session, m.id)
        if locked is None or locked.step_token != token or locked.state != "running":
            return False
        if switch_user(session, embedder, tenant=user[0], user_id=user[1]):
            locked.switched_users += 1
            locked.updated_at = func.now()
    return True


def _walk_once(ctx: StepContext, migration_id: int, token: str) -> bool:
    """One batch and its completed users' switches; False when there is no more."""
    with ctx.sessions.begin() as session:
        m = lock_migration(session, migration_id)
        if m is None or m.step_token != token or m.state != "running":
            return False
        if m.walked:
            users = None
        else:
            batch = walk_batch(session, m, ctx.embedders.get(target_of(m)))
            REEMBED_MEMORIES_TOTAL.inc(batch.embedded)
            users = batch.completed
        session.flush()  # the cursor and counters, before `m` leaves the session
        session.expunge(m)
    wait = SWITCH_AFTER_S - (ctx.now() - m.created_at).total_seconds()
    if wait > 0:
        time.sleep(wait)  # pacing: see SWITCH_AFTER_S
    if users is None:
        users = stragglers(ctx.sessions, m)
        if not users:
            return _mark(ctx, migration_id, token, "running", state="ready")
    return all(_switch(ctx, m, token, u) for u in users)


def _abort_once(ctx: StepContext, migration_id: int, token: str) -> bool:
    with ctx.sessions() as session:
        m = session.get(EmbeddingMigration, migration_id)
        if m is None:
            return False
        session.expunge(m)
    users = switched_back_pending(ctx.sessions, m)
    for tenant, user_id in users:
        with ctx.sessions.begin() as session:
            locked = lock_migration(session, migration_id)
            if locked is None or locked.step_token != token or locked.state != "aborting":
                return False
            switch_back_user(session, target=m.target_model, tenant=tenant, user_id=user_id)
    if users:
        return True
    if _drop_side(ctx, m, "e.model = :target"):
        return True
    return _mark(ctx, migration_id, token, "aborting", state="aborted", finished=True)


def _drop_old_once(ctx: StepContext, migration_id: int, token: str) -> bool:
    with ctx.sessions() as session:
        m = session.get(EmbeddingMigration, migration_id)
        if m is None or m.grace_until is None or m.grace_until > ctx.now():
            return False
        session.expunge(m)
    if _drop_side(ctx, m, "e.model <> :target"):
        return True
    with ctx.sessions.begin() as session:
        locked = lock_migration(session, migration_id)
        if locked is not None and locked.step_token == token:
            locked.old_dropped_at = func.now()
    return False


def _drop_side(ctx: StepContext, m: EmbeddingMigration, which: str) -> int:
    """Delete one bounded batch of the scope's side vectors; returns how many."""
    scope, params = scope_sql(m, alias="e")
    with ctx.sessions.begin() as session:
        result = session.execute(
            text(
                "DELETE FROM memory_embeddings WHERE (memory_id, model) IN ("
                f"SELECT e.memory_id, e.model FROM memory_embeddings e WHERE {which}{scope} "
                "LIMIT :n)"
            ),
            params | {"target": m.target_model, "n": DROP_BATCH},
        )
        return int(result.rowcount)  # type: ignore[attr-defined]


def _mark(
    ctx: StepContext,
    migration_id: int,
    token: str,
    expect: str,
    *,
    state: str,
    finished: bool = False,
) -> bool:
    with ctx.sessions.begin() as session:
        m = lock_migration(session, migration_id)
        if m is not None and m.step_token == token and m.state == expect:
            m.state = state
            m.updated_at = func.now()
            if finished:
                m.finished_at = func.now()
    return False


def run_step(
    ctx: StepContext, *, migration_id: int, token: str, budget_s: float, rate_per_s: float
) -> bool:
    """Work until `budget_s` is spent; True when another step should follow."""
    # A locking read: the step is sent before the transaction that stores its token
    # commits, and an idle worker can take it at once. A plain read would then see the
    # previous token and end the chain; the lock waits for that commit instead.
    with ctx.sessions.begin() as session:
        m = lock_migration(session, migration_id)
        if m is None or m.step_token != token:
            return False
        state, batch_size = m.state, m.batch_size
    phase = {"running": _walk_once, "aborting": _abort_once, "finished": _drop_old_once}.get(state)
    if phase is None:
        return False
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        started = time.monotonic()
        if not phase(ctx, migration_id, token):
            return False
        if rate_per_s > 0:
            # The rate limit: a batch of n rows takes at least n / rate seconds.
            time.sleep(max(0.0, batch_size / rate_per_s - (time.monotonic() - started)))
    return _still(ctx, migration_id, token, ("running", "aborting", "finished"))


def hand_over(
    sessions: sessionmaker[Session], migration_id: int, token: str, dispatch: Dispatch
) -> bool:
    """Give the chain a new token and send the step that carries it, in one
    transaction: the send comes first, so a failed commit leaves a step that finds its
    token stale (and this task's message, unacknowledged, is delivered again)."""
    with sessions.begin() as session:
        m = lock_migration(session, migration_id)
        if m is None or m.step_token != token:
            return False
        m.step_token = uuid.uuid4().hex
        dispatch(migration_id, m.step_token)
    return True
