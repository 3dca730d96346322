"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from api.deps import StateDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(state: StateDep) -> dict[str, str]:
    """Ready when Postgres and Redis answer."""
    async with state.engine.connect() as conn:
        await conn.execute(text("SELECT 1"))
    await state.redis.ping()
    return {"status": "ready"}
