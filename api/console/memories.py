"""One memory: its content and scores, its history as a timeline, its source turns;
pin, edit and delete it through the same service functions as REST."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Final

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import RedirectResponse
from sqlalchemy.ext.asyncio import AsyncSession

from api.console.auth import CsrfDep, ReadViewer, Viewer, WriteViewer
from api.console.routing import ConsoleRoute
from api.console.templating import render
from api.deps import StateDep
from api.state import AppState
from memwell.auth.size_limits import check_memories
from memwell.intake.turn_status import get_turn
from memwell.memories.add import MemoryKind
from memwell.memories.edit import EditResult, MemoryPatch, update_memory
from memwell.memories.service import delete_memory, get_memory, memory_history

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)

#: source turns shown on the page; the ids of the rest are listed
TURNS_SHOWN: Final = 10


async def _source_turns(session: AsyncSession, tenant: str, ids: list[str]) -> list[Any]:
    found = [await get_turn(session, tenant=tenant, turn_id=i) for i in ids[:TURNS_SHOWN]]
    return [t for t in found if t is not None]


@router.get("/memories/{memory_id}")
async def memory_page(
    request: Request, memory_id: uuid.UUID, state: StateDep, viewer: ReadViewer
) -> Response:
    async with state.sessions() as session:
        memory = await get_memory(session, tenant=viewer.tenant, memory_id=memory_id)
        history = await memory_history(session, tenant=viewer.tenant, memory_id=memory_id)
        turns = await _source_turns(session, viewer.tenant, memory.source_turn_ids)
    return render(
        request, "memory.html", viewer, memory=memory, history=history, turns=turns,
        turns_shown=TURNS_SHOWN,
    )  # fmt: skip


async def _patch(
    state: AppState, viewer: Viewer, memory_id: uuid.UUID, patch: MemoryPatch
) -> EditResult:
    async with state.sessions() as session, session.begin():
        return await update_memory(
            session, tenant=viewer.tenant, memory_id=memory_id, patch=patch,
            embedder=state.documents, merge_threshold=state.settings.merge_threshold,
            entities=state.settings.entities_enabled,
        )  # fmt: skip


@router.post("/memories/{memory_id}/pin")
async def pin(
    memory_id: uuid.UUID,
    state: StateDep,
    _: CsrfDep,
    viewer: WriteViewer,
    pinned: Annotated[bool, Form()],
) -> Response:
    """The same edit as PATCH /v1/memories/{id} with `pinned`: an update event."""
    await _patch(state, viewer, memory_id, MemoryPatch(pinned=pinned))
    return RedirectResponse(f"/console/memories/{memory_id}", 303)


@router.get("/memories/{memory_id}/edit")
async def edit_page(
    request: Request, memory_id: uuid.UUID, state: StateDep, viewer: WriteViewer
) -> Response:
    async with state.sessions() as session:
        memory = await get_memory(session, tenant=viewer.tenant, memory_id=memory_id)
    return render(request, "memory_edit.html", viewer, memory=memory)


@router.post("/memories/{memory_id}/edit")
async def edit(
    request: Request,
    memory_id: uuid.UUID,
    state: StateDep,
    _: CsrfDep,
    viewer: WriteViewer,
    content: Annotated[str, Form(min_length=1)],
    kind: Annotated[MemoryKind, Form()],
    importance: Annotated[float, Form(ge=0, le=1)],
) -> Response:
    """Only what changed is sent, so an unchanged content is not re-embedded."""
    async with state.sessions() as session:
        before = await get_memory(session, tenant=viewer.tenant, memory_id=memory_id)
    changes = {
        name: value
        for name, value, old in (
            ("content", content.strip(), before.content),
            ("kind", kind, before.kind),
            ("importance", importance, before.importance),
        )
        if value != old
    }
    if not changes:
        return RedirectResponse(f"/console/memories/{memory_id}", 303)
    check_memories([(str(changes.get("content", "")), {})], state.settings)
    result = await _patch(state, viewer, memory_id, MemoryPatch.model_validate(changes))
    return render(request, "memory_edited.html", viewer, result=result)


@router.get("/memories/{memory_id}/delete")
async def delete_confirm(request: Request, memory_id: uuid.UUID, viewer: ReadViewer) -> Response:
    return render(
        request, "confirm.html", viewer, title="Delete this memory?",
        detail="Its text is removed from the memory and from its history; the events stay, "
        "redacted, with a delete event.",
        action=f"/console/memories/{memory_id}/delete", fields={}, button="Delete memory",
        back=f"/console/memories/{memory_id}",
    )  # fmt: skip


@router.post("/memories/{memory_id}/delete")
async def delete(
    memory_id: uuid.UUID, state: StateDep, _: CsrfDep, viewer: WriteViewer
) -> Response:
    """The same tombstone as DELETE /v1/memories/{id}."""
    async with state.sessions() as session, session.begin():
        await delete_memory(
            session, tenant=viewer.tenant, memory_id=memory_id, reason="console delete"
        )
    return RedirectResponse(f"/console/memories/{memory_id}", 303)
