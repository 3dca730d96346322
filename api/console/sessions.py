"""One session of a user: its stored row, summary and Redis buffer; closing it now."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Query, Request, Response
from fastapi.responses import RedirectResponse

from api.console.auth import CsrfDep, ReadViewer, WriteViewer
from api.console.routing import ConsoleRoute
from api.console.templating import render
from api.deps import StateDep
from api.schemas import IdentifierPath
from memwell.db.tenancy import async_tenant_session
from memwell.sessions.service import close_session, get_session

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)


@router.get("/session")
async def session_page(
    request: Request,
    state: StateDep,
    viewer: ReadViewer,
    user: Annotated[IdentifierPath, Query()],
    id: Annotated[IdentifierPath, Query()],
) -> Response:
    async with async_tenant_session(state.sessions, viewer.tenant) as session:
        detail = await get_session(
            session, buffer=state.chat.buffer, tenant=viewer.tenant, user_id=user, session_id=id
        )
    return render(request, "session.html", viewer, session=detail)


@router.get("/session/close")
async def close_confirm(
    request: Request,
    viewer: ReadViewer,
    user: Annotated[IdentifierPath, Query()],
    id: Annotated[IdentifierPath, Query()],
) -> Response:
    return render(
        request, "confirm.html", viewer, title=f"Close session {id}?",
        detail="It is summarized now, its buffer is flushed, and its status becomes closed. "
        "A later turn reopens it.",
        action="/console/session/close", fields={"user_id": user, "session_id": id},
        button="Close session", back=f"/console/session?{urlencode({'user': user, 'id': id})}",
    )  # fmt: skip


@router.post("/session/close")
async def close(
    state: StateDep,
    _: CsrfDep,
    viewer: WriteViewer,
    user_id: Annotated[IdentifierPath, Form()],
    session_id: Annotated[IdentifierPath, Form()],
) -> Response:
    """The same close as POST /v1/sessions/{id}/close."""
    async with async_tenant_session(state.sessions, viewer.tenant) as session:
        await close_session(
            session, buffer=state.chat.buffer, tenant=viewer.tenant, user_id=user_id,
            session_id=session_id,
        )  # fmt: skip
    back = urlencode({"user": user_id, "id": session_id})
    return RedirectResponse(f"/console/session?{back}", 303)
