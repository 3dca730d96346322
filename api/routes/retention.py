"""PATCH /v1/memories/{id}: pin a memory, or give it an expiry."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, field_validator

from api.deps import StateDep, TenantDep
from memwell.intake.turns import Instant
from memwell.memories.record import MemoryRecord
from memwell.memories.retention_flags import UNSET, set_retention_flags

router = APIRouter(prefix="/v1/memories", tags=["memories"])


class RetentionPatch(BaseModel):
    """Only the fields sent change; `"expires_at": null` clears an expiry."""

    model_config = ConfigDict(extra="forbid")

    pinned: bool | None = None
    expires_at: Instant | None = None

    @field_validator("expires_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


@router.patch("/{memory_id}")
async def patch_memory_retention(
    memory_id: uuid.UUID, body: RetentionPatch, state: StateDep, tenant: TenantDep
) -> MemoryRecord:
    async with state.sessions.begin() as session:
        return await set_retention_flags(
            session,
            tenant=tenant,
            memory_id=memory_id,
            pinned=body.pinned,
            expires_at=body.expires_at if "expires_at" in body.model_fields_set else UNSET,
        )
