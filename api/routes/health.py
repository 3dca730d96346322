"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from sqlalchemy import text

from api.deps import StateDep
from memwell.core import worker_presence
from memwell.llm.model_server import probe_model_server_async

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(state: StateDep) -> dict[str, Any]:
    """Ready when Postgres and Redis answer; reports how many workers consume, and the
    local model server of `memwell up --llm-gguf` when there is one.

    No worker, or a model server down, does not make the API unready: it still serves
    searches and queues turns durably, and LLM steps fall back to local mode. `memwell
    up` and operators read `workers` to know that consolidation runs."""
    async with state.engine.connect() as conn:
        await conn.execute(text("SELECT 1"))
    await state.redis.ping()
    workers = await worker_presence.alive_async(state.redis)
    ready: dict[str, Any] = {"status": "ready", "workers": len(workers)}
    if model_server := state.settings.local_llm_url:
        ready["model_server"] = (await probe_model_server_async(model_server)).as_dict()
    return ready
