"""Pipeline health: queue depths, backlog, the consolidation rate, maintenance runs and
dead letters (with replay); workers alive load on their own, since a ping waits.

Queues, backlog and the rate are the stack's, as `memwell status` shows them: counts,
no content. Dead letters carry a user's payload, so a key sees its tenant's only;
with auth disabled (one machine, one operator) every letter shows, as in the CLI.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from api.console.auth import AdminViewer, CsrfDep, ReadViewer, Viewer
from api.console.routing import ConsoleRoute
from api.console.templating import render
from api.deps import StateDep
from api.state import AppState
from memwell.core import stack
from memwell.core.metrics import read_queue_depths
from memwell.core.queues import Queue
from memwell.db.engine import make_sessionmaker
from memwell.intake.dead_letters import (
    list_dead_letters,
    replay_dead_letters,
    replayable,
    turn_ids_of,
)
from memwell.intake.dispatch import send_by_name
from memwell.maintenance.activity import consolidation_rate
from memwell.maintenance.runs import last_runs
from memwell.maintenance.status import StackStatus, read_backlog, read_broker

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)

LETTERS_SHOWN: Final = 50
#: workers answer a ping within milliseconds; waiting longer only slows the panel
PING_TIMEOUT_S: Final = 0.5


def _letters_tenant(state: AppState, viewer: Viewer) -> str | None:
    return None if state.settings.auth_disabled else viewer.tenant


def _letters(state: AppState, tenant: str | None) -> list[dict[str, Any]]:
    # The connecting role, as the CLI: dead letters are written outside any tenant.
    with make_sessionmaker(state.outbox_engine)() as session:
        return [
            {"id": d.id, "task": d.task_name, "tenant": d.tenant, "error": d.error,
             "attempts": d.attempts, "created_at": d.created_at,
             "turn_ids": turn_ids_of(d.payload), "replayable": replayable(d.payload)}
            for d in list_dead_letters(session, limit=LETTERS_SHOWN, tenant=tenant)
        ]  # fmt: skip


@router.get("/health")
async def health_page(request: Request, state: StateDep, viewer: ReadViewer) -> Response:
    redis_url = stack.redis_url(state.settings)
    async with state.system_sessions() as session:
        pending, oldest_s, open_letters = await read_backlog(session)
        rate = await consolidation_rate(session, now=datetime.now(UTC))
    queues, unacked = await asyncio.to_thread(
        read_queue_depths, redis_url, [q.value for q in Queue]
    )
    letters = await asyncio.to_thread(_letters, state, _letters_tenant(state, viewer))
    return render(
        request, "health.html", viewer, pending=pending, oldest_s=oldest_s,
        open_letters=open_letters, rate=rate, queues=queues, unacked=unacked,
        runs=await last_runs(state.redis), letters=letters,
        replayed=request.query_params.get("replayed"),
    )  # fmt: skip


@router.get("/health/workers")
async def workers_panel(request: Request, state: StateDep, viewer: ReadViewer) -> Response:
    """The workers that answer a Celery ping, for the health page to load."""
    status = StackStatus()
    await asyncio.to_thread(
        read_broker, status, stack.redis_url(state.settings), ping_timeout_s=PING_TIMEOUT_S
    )
    return render(request, "health_workers.html", viewer, status=status)


@router.post("/dead-letters/{letter_id}/replay")
async def replay(letter_id: int, state: StateDep, _: CsrfDep, viewer: AdminViewer) -> Response:
    """The same replay as `memwell dlq replay ID`: re-sent under its task's name."""
    send = partial(send_by_name, broker_url=stack.redis_url(state.settings))
    tenant = _letters_tenant(state, viewer)

    def run() -> list[int]:
        with make_sessionmaker(state.outbox_engine).begin() as session:
            return replay_dead_letters(session, send, ids=[letter_id], tenant=tenant)

    done = await asyncio.to_thread(run)
    return RedirectResponse(f"/console/health?replayed={','.join(map(str, done)) or 'none'}", 303)
