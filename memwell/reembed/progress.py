"""A re-embed as its doors show it: one record, read from the migration's row."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from memwell.db.models import EmbeddingMigration


class MigrationStatus(BaseModel):
    """A re-embed: scope, target, state and progress."""

    model_config = ConfigDict(frozen=True)

    id: int
    state: str
    target_spec: str
    target_model: str
    target_dims: int
    target_base_url: str | None
    tenant: str | None
    user_id: str | None
    #: embedded memories in scope when it started
    total: int
    #: memories the walk has passed (new ones written meanwhile get both vectors)
    embedded: int
    switched_users: int
    walked: bool
    rate_per_s: float
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    grace_until: datetime | None
    old_dropped_at: datetime | None
    #: the last step's failure, until a batch commits again
    error: str | None

    @property
    def fraction(self) -> float:
        if self.state in ("ready", "finished"):
            return 1.0
        return min(1.0, self.embedded / self.total) if self.total else 0.0


def status_of(m: EmbeddingMigration) -> MigrationStatus:
    return MigrationStatus(
        id=m.id,
        state=m.state,
        target_spec=m.target_spec,
        target_model=m.target_model,
        target_dims=m.target_dims,
        target_base_url=m.target_base_url,
        tenant=m.tenant,
        user_id=m.user_id,
        total=m.total,
        embedded=m.embedded,
        switched_users=m.switched_users,
        walked=m.walked,
        rate_per_s=m.rate_per_s,
        created_at=m.created_at,
        updated_at=m.updated_at,
        finished_at=m.finished_at,
        grace_until=m.grace_until,
        old_dropped_at=m.old_dropped_at,
        error=m.error,
    )


_NEWEST = select(EmbeddingMigration).order_by(EmbeddingMigration.id.desc()).limit(1)


def latest_progress(session: Session) -> dict[str, Any] | None:
    """The newest re-embed as plain JSON values (`memwell status`), None if none ever ran."""
    m = session.execute(_NEWEST).scalar_one_or_none()
    return None if m is None else status_of(m).model_dump(mode="json")


async def latest_progress_async(session: AsyncSession) -> dict[str, Any] | None:
    """The same, for the API's /metrics."""
    m = (await session.execute(_NEWEST)).scalar_one_or_none()
    return None if m is None else status_of(m).model_dump(mode="json")
