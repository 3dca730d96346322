"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from api.deps import StateDep
from memwell.core import worker_presence

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(state: StateDep) -> dict[str, str | int]:
    """Ready when Postgres and Redis answer; reports how many workers consume.

    No worker does not make the API unready: it still serves searches and chats and
    queues turns durably until a worker comes. `memwell up` and operators read
    `workers` to know that consolidation runs."""
    async with state.engine.connect() as conn:
        await conn.execute(text("SELECT 1"))
    await state.redis.ping()
    workers = await worker_presence.alive_async(state.redis)
    return {"status": "ready", "workers": len(workers)}
