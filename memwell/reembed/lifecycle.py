"""The re-embed's service functions: start, status, pause, resume, finish, abort, tick.

Every door (CLI, REST) calls these and nothing else. They change the migration's
row and hand the work to the step task on the maintenance queue (`dispatch`); the
only embedding done here is a probe of the target at start (it must answer, and its
width is recorded) and `finish`'s last catch-up of stragglers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.errors import Conflict, InvalidInput, NotFound
from memwell.db.models import EmbeddingMigration
from memwell.embeddings import Embedder, EmbeddingError
from memwell.reembed.progress import MigrationStatus, status_of
from memwell.reembed.routing import IN_FLIGHT
from memwell.reembed.scope import scope_sql
from memwell.reembed.specs import TargetSpec
from memwell.reembed.switch import switch_user
from memwell.reembed.walk import stragglers

Dispatch = Callable[[int, str], None]


def _in_flight(session: Session, *, lock: bool = False) -> EmbeddingMigration | None:
    stmt = select(EmbeddingMigration).where(EmbeddingMigration.state.in_(IN_FLIGHT))
    if lock:
        stmt = stmt.with_for_update()
    return session.execute(stmt).scalar_one_or_none()


def _count_scope(session: Session, tenant: str | None, user_id: str | None) -> int:
    probe = EmbeddingMigration(tenant=tenant, user_id=user_id)
    scope, params = scope_sql(probe)
    return int(
        session.execute(
            text(f"SELECT count(*) FROM memories m WHERE m.embedding IS NOT NULL{scope}"), params
        ).scalar_one()
    )


def start_migration(
    sessions: sessionmaker[Session],
    *,
    target: TargetSpec,
    embedder: Embedder,
    tenant: str | None,
    user_id: str | None,
    batch_size: int,
    rate_per_s: float,
    dispatch: Dispatch,
) -> MigrationStatus:
    """Record a re-embed of the scope to `target` and send its first step.

    `embedder` is the target's, already built: its width is probed here, so a wrong
    model name or an endpoint that does not answer fails now, not in a worker."""
    if user_id is not None and tenant is None:
        raise InvalidInput("a user scope needs its tenant")
    try:
        dims = embedder.dimensions
    except EmbeddingError as exc:  # a wrong model name, or an endpoint that is not there
        raise InvalidInput(f"the target {target.spec} did not answer: {exc}") from exc
    with sessions.begin() as session:
        if _in_flight(session) is not None:
            raise Conflict("a re-embed is already in flight: see `memwell reembed status`")
        pending = session.execute(
            select(EmbeddingMigration.id).where(
                EmbeddingMigration.state == "finished", EmbeddingMigration.old_dropped_at.is_(None)
            )
        ).first()
        if pending is not None:
            raise Conflict(
                f"re-embed {pending[0]} keeps the previous vectors until its grace period "
                "ends; wait, or drop them now with `memwell reembed finish --grace 0`"
            )
        m = EmbeddingMigration(
            tenant=tenant,
            user_id=user_id,
            target_spec=target.spec,
            target_model=target.model_name,
            target_base_url=target.base_url,
            target_dims=dims,
            state="running",
            step_token=uuid.uuid4().hex,
            total=_count_scope(session, tenant, user_id),
            batch_size=batch_size,
            rate_per_s=rate_per_s,
        )
        session.add(m)
        try:
            session.flush()
        except IntegrityError as exc:  # a concurrent start won the in-flight slot
            raise Conflict("a re-embed is already in flight") from exc
        migration_id, token = m.id, m.step_token
    dispatch(migration_id, token)
    return get_status(sessions, migration_id=migration_id)


def get_status(
    sessions: sessionmaker[Session], *, migration_id: int | None = None, tenant: str | None = None
) -> MigrationStatus:
    """One re-embed (default: the newest) with its progress. `tenant`: only one that
    tenant may see (store-wide or its own)."""
    with sessions() as session:
        stmt = select(EmbeddingMigration).order_by(EmbeddingMigration.id.desc())
        if migration_id is not None:
            stmt = stmt.where(EmbeddingMigration.id == migration_id)
        if tenant is not None:
            stmt = stmt.where(
                (EmbeddingMigration.tenant.is_(None)) | (EmbeddingMigration.tenant == tenant)
            )
        m = session.execute(stmt.limit(1)).scalar_one_or_none()
        if m is None:
            raise NotFound("no re-embed" + (f" {migration_id}" if migration_id else ""))
        return status_of(m)


def _transition(
    sessions: sessionmaker[Session],
    *,
    allowed: tuple[str, ...],
    tenant: str | None,
    change: Callable[[EmbeddingMigration], None],
) -> tuple[EmbeddingMigration, MigrationStatus]:
    with sessions.begin() as session:
        m = _in_flight(session, lock=True)
        if m is None or (tenant is not None and m.tenant != tenant):
            raise NotFound("no re-embed in flight")
        if m.state not in allowed:
            raise Conflict(f"the re-embed is {m.state}; this needs it {' or '.join(allowed)}")
        change(m)
        m.updated_at = func.now()
        session.flush()
        session.refresh(m)
        return m, status_of(m)


def _new_token(m: EmbeddingMigration, state: str) -> None:
    m.state = state
    m.step_token = uuid.uuid4().hex


def pause_migration(
    sessions: sessionmaker[Session], *, tenant: str | None = None
) -> MigrationStatus:
    """Stop after the current batch (its step sees the state and ends the chain)."""
    return _transition(
        sessions, allowed=("running",), tenant=tenant, change=lambda m: _new_token(m, "paused")
    )[1]


def resume_migration(
    sessions: sessionmaker[Session], *, dispatch: Dispatch, tenant: str | None = None
) -> MigrationStatus:
    """Continue a paused re-embed, or re-send the step of a running one (harmless: the
    previous chain's token goes stale)."""
    m, status = _transition(
        sessions,
        allowed=("running", "paused", "aborting"),
        tenant=tenant,
        change=lambda m: _new_token(m, "aborting" if m.state == "aborting" else "running"),
    )
    dispatch(m.id, m.step_token)
    return status


def abort_migration(
    sessions: sessionmaker[Session], *, dispatch: Dispatch, tenant: str | None = None
) -> MigrationStatus:
    """Swap every switched user back and drop the target's vectors, in the background."""
    m, status = _transition(
        sessions,
        allowed=("running", "paused", "ready", "aborting"),
        tenant=tenant,
        change=lambda m: _new_token(m, "aborting"),
    )
    dispatch(m.id, m.step_token)
    return status


def finish_migration(
    sessions: sessionmaker[Session],
    *,
    embedder: Embedder,
    grace: timedelta,
    dispatch: Dispatch,
    tenant: str | None = None,
) -> MigrationStatus:
    """Make the target the default of the scope (every user switched; stragglers written
    since the walk ended are switched here) and schedule the previous vectors' drop
    after `grace` (0: now)."""

    def finish(m: EmbeddingMigration) -> None:
        if embedder.model_name != m.target_model:
            raise InvalidInput(f"finish needs the target's embedder, not {embedder.model_name}")
        _new_token(m, "finished")
        m.finished_at = func.now()
        m.grace_until = datetime.now(UTC) + grace

    with sessions() as session:
        current = _in_flight(session)
        if current is None or (tenant is not None and current.tenant != tenant):
            raise NotFound("no re-embed in flight")
        if current.state != "ready":
            raise Conflict(
                f"the re-embed is {current.state} ({current.embedded} of {current.total} "
                "memories walked); finish needs it ready"
            )
        session.expunge(current)
    _switch_stragglers(sessions, current, embedder)
    m, status = _transition(sessions, allowed=("ready",), tenant=tenant, change=finish)
    if grace <= timedelta(0):
        dispatch(m.id, m.step_token)
    return status


def _switch_stragglers(
    sessions: sessionmaker[Session], m: EmbeddingMigration, embedder: Embedder
) -> None:
    while users := stragglers(sessions, m):
        for tenant, user_id in users:
            with sessions.begin() as session:
                switch_user(session, embedder, tenant=tenant, user_id=user_id)


def tick(
    sessions: sessionmaker[Session], *, stale_after: timedelta, dispatch: Dispatch
) -> list[int]:
    """Beat's safety net: re-send the step of a re-embed whose chain stopped (its worker
    was killed between steps, or the broker lost the message), and the drop of the
    previous vectors once a finished re-embed's grace period is over. Returns the ids
    sent for."""
    sent: list[int] = []
    now = datetime.now(UTC)
    with sessions.begin() as session:
        rows = session.execute(
            select(EmbeddingMigration)
            .where(
                (
                    EmbeddingMigration.state.in_(("running", "aborting"))
                    & (EmbeddingMigration.updated_at < now - stale_after)
                )
                | (
                    (EmbeddingMigration.state == "finished")
                    & EmbeddingMigration.old_dropped_at.is_(None)
                    & (EmbeddingMigration.grace_until <= now)
                    & (EmbeddingMigration.updated_at < now - stale_after)
                )
            )
            .with_for_update(skip_locked=True)
        ).scalars()
        for m in rows:
            m.step_token = uuid.uuid4().hex
            m.updated_at = func.now()
            dispatch(m.id, m.step_token)
            sent.append(m.id)
    return sent


def note_error(sessions: sessionmaker[Session], *, migration_id: int, error: str) -> None:
    """Show a step's failure in `status` (the step is retried, or re-sent by the tick;
    the next batch that commits clears it)."""
    with sessions.begin() as session:
        session.execute(
            text("UPDATE embedding_migrations SET error = :e WHERE id = :id"),
            {"e": error[:2000], "id": migration_id},
        )
