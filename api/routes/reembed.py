"""Re-embed the tenant's memories with another model: start, status, pause, resume,
finish, abort. Thin: each route calls one service function of memwell/reembed.

Admin scope, and the tenant's own memories only: a store-wide re-embed is an
operator's act (`memwell reembed start`), not a tenant's. A tenant picks its target
from the operator's list (MEMWELL_REEMBED_TARGETS) by name; the body has no field for
an endpoint or a credential, so the server's key never goes where a tenant points.
The service functions are synchronous (the target's probe is a model call), so they
run on a worker thread.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, status
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session, sessionmaker

from api.deps import AdminTenantDep, StateDep
from api.openapi import PROBLEM_REF
from api.state import AppState
from memwell.core import stack
from memwell.core.errors import InvalidInput
from memwell.db.engine import make_sessionmaker
from memwell.intake.turns import Identifier
from memwell.reembed.lifecycle import (
    Dispatch,
    abort_migration,
    finish_migration,
    get_status,
    pause_migration,
    resume_migration,
    start_migration,
)
from memwell.reembed.progress import MigrationStatus
from memwell.reembed.sender import step_sender
from memwell.reembed.specs import build_target_embedder, offered_target, parse_spec

router = APIRouter(prefix="/v1/admin/reembed", tags=["admin"])

#: Another re-embed is in flight, or this one is not in the state the action needs.
CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {
        "description": "Not possible in the re-embed's current state",
        "content": {"application/problem+json": {"schema": PROBLEM_REF}},
    }
}


class ReembedStart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to: Annotated[
        str,
        Field(
            max_length=300,
            description="provider:model, one of the targets the operator offers: the local "
            "models and MEMWELL_REEMBED_TARGETS (e.g. openai:text-embedding-3-small).",
        ),
    ]
    user_id: Identifier | None = Field(default=None, description="Only this user's memories.")
    batch_size: int | None = Field(default=None, ge=1, le=10_000)
    rate_per_s: float | None = Field(
        default=None, ge=0, description="Memories/s at most (0: no cap)."
    )


class ReembedFinish(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grace_s: float | None = Field(
        default=None, ge=0, description="Keep the previous vectors this long (default: settings)."
    )


def _sessions(state: AppState) -> sessionmaker[Session]:
    # The connecting role: a migration's row is the store's, not one tenant's.
    return make_sessionmaker(state.outbox_engine)


def _dispatch(state: AppState) -> Dispatch:
    return step_sender(stack.redis_url(state.settings))


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Start re-embedding the tenant",
    responses=CONFLICT,
)
async def start(body: ReembedStart, state: StateDep, tenant: AdminTenantDep) -> MigrationStatus:
    try:
        spec = offered_target(body.to, state.settings)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from exc
    settings = state.settings

    def run() -> MigrationStatus:
        return start_migration(
            _sessions(state),
            target=spec,
            embedder=build_target_embedder(settings, spec),
            tenant=tenant,
            user_id=body.user_id,
            batch_size=body.batch_size or settings.reembed_batch_size,
            rate_per_s=settings.reembed_rate_per_s if body.rate_per_s is None else body.rate_per_s,
            dispatch=_dispatch(state),
        )

    return await asyncio.to_thread(run)


@router.get("", summary="The newest re-embed this tenant can see, with its progress")
async def read(state: StateDep, tenant: AdminTenantDep) -> MigrationStatus:
    return await asyncio.to_thread(get_status, _sessions(state), tenant=tenant)


@router.post("/pause", summary="Stop after the current batch", responses=CONFLICT)
async def pause(state: StateDep, tenant: AdminTenantDep) -> MigrationStatus:
    return await asyncio.to_thread(pause_migration, _sessions(state), tenant=tenant)


@router.post("/resume", summary="Continue a paused re-embed", responses=CONFLICT)
async def resume(state: StateDep, tenant: AdminTenantDep) -> MigrationStatus:
    return await asyncio.to_thread(
        resume_migration, _sessions(state), dispatch=_dispatch(state), tenant=tenant
    )


@router.post("/abort", summary="Put every user back on the previous model", responses=CONFLICT)
async def abort(state: StateDep, tenant: AdminTenantDep) -> MigrationStatus:
    return await asyncio.to_thread(
        abort_migration, _sessions(state), dispatch=_dispatch(state), tenant=tenant
    )


@router.post(
    "/finish",
    summary="Make the target the default; drop old vectors after the grace",
    responses=CONFLICT,
)
async def finish(body: ReembedFinish, state: StateDep, tenant: AdminTenantDep) -> MigrationStatus:
    settings = state.settings

    def run() -> MigrationStatus:
        sessions = _sessions(state)
        current = get_status(sessions, tenant=tenant)
        spec = parse_spec(current.target_spec, base_url=current.target_base_url)
        grace = settings.reembed_grace_s if body.grace_s is None else body.grace_s
        return finish_migration(
            sessions,
            embedder=build_target_embedder(settings, spec),
            grace=timedelta(seconds=grace),
            dispatch=_dispatch(state),
            tenant=tenant,
        )

    return await asyncio.to_thread(run)
