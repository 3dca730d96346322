"""Users of the tenant, one user (sessions and memories), and erasing a user.

Ids travel in the query string: user ids may hold "/" and are the client's own.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Query, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import BaseModel, ConfigDict, Field

from api.console.auth import AdminViewer, CsrfDep, ReadViewer
from api.console.routing import ConsoleRoute
from api.console.templating import render
from api.deps import StateDep
from api.schemas import IdentifierPath
from memwell.db.tenancy import async_tenant_session
from memwell.intake.turns import Identifier
from memwell.memories.add import MemoryKind
from memwell.memories.erasure import erase_user_async
from memwell.memories.listing import MemoryFilters, MemoryPage, Sort, list_memories
from memwell.sessions.records import SessionPage
from memwell.sessions.service import list_sessions
from memwell.users.profile import MAX_ENTITIES, get_profile
from memwell.users.records import UserDetail
from memwell.users.service import get_user, list_users

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)

#: rows per page: small pages keep every page fast and readable
PAGE = 50
#: the profile page's top entities unless the page asks for more
PROFILE_ENTITIES = 25
SESSIONS_SHOWN = 20
CURSOR_MAX = 8192


class MemoryQuery(BaseModel):
    """The user page's memory filters, as its form sends them."""

    model_config = ConfigDict(extra="ignore")

    id: Identifier
    kind: MemoryKind | Literal[""] = ""
    pinned: Literal["", "yes", "no"] = ""
    q: str = Field(default="", max_length=500)
    include: list[Literal["deleted", "superseded"]] = Field(default_factory=list)
    sort: Sort = "newest"
    cursor: str | None = Field(default=None, max_length=CURSOR_MAX)

    def link(self, cursor: str | None) -> str:
        """This page of the list, or the one at `cursor`, as a console URL."""
        params = self.model_dump(exclude_defaults=True, exclude={"cursor"})
        if cursor:
            params["cursor"] = cursor
        return "/console/user?" + urlencode(params, doseq=True)

    def filters(self) -> MemoryFilters:
        return MemoryFilters(
            kinds=(self.kind,) if self.kind else None,
            pinned={"yes": True, "no": False}.get(self.pinned),
            text=self.q.strip() or None,
            include_deleted="deleted" in self.include,
            include_superseded="superseded" in self.include,
        )


@router.get("")
async def home() -> Response:
    return RedirectResponse("/console/users", 303)


@router.get("/users")
async def users_page(
    request: Request,
    state: StateDep,
    viewer: ReadViewer,
    cursor: Annotated[str | None, Query(max_length=CURSOR_MAX)] = None,
) -> Response:
    async with async_tenant_session(state.sessions, viewer.tenant) as session:
        page = await list_users(session, tenant=viewer.tenant, limit=PAGE, cursor=cursor)
    return render(request, "users.html", viewer, page=page)


@router.get("/user")
async def user_page(
    request: Request, state: StateDep, viewer: ReadViewer, query: Annotated[MemoryQuery, Query()]
) -> Response:
    tenant = viewer.tenant

    async def counts() -> UserDetail:
        async with async_tenant_session(state.sessions, tenant) as session:
            return await get_user(session, tenant=tenant, user_id=query.id)

    async def recent_sessions() -> SessionPage:
        async with async_tenant_session(state.sessions, tenant) as session:
            return await list_sessions(
                session, tenant=tenant, user_id=query.id, limit=SESSIONS_SHOWN, cursor=None
            )

    async def page() -> MemoryPage:
        async with async_tenant_session(state.sessions, tenant) as session:
            return await list_memories(
                session, tenant=tenant, user_id=query.id, filters=query.filters(),
                sort=query.sort, limit=PAGE, cursor=query.cursor,
            )  # fmt: skip

    # Three reads of one user, each on its own connection: the page waits for the
    # slowest (a 100k-memory user's count or sort), not for their sum.
    user, sessions, memories = await asyncio.gather(counts(), recent_sessions(), page())
    return render(
        request, "user.html", viewer, user=user, sessions=sessions, memories=memories,
        query=query,
    )  # fmt: skip


@router.get("/user/profile")
async def profile_page(
    request: Request,
    state: StateDep,
    viewer: ReadViewer,
    id: Annotated[IdentifierPath, Query()],
    entities: Annotated[int, Query(ge=0, le=MAX_ENTITIES)] = PROFILE_ENTITIES,
) -> Response:
    """The user's entity memory, as GET /v1/users/{id}/profile returns it: current
    facts by entity, then the most mentioned entities with their current relations."""
    async with async_tenant_session(state.sessions, viewer.tenant) as session:
        profile = await get_profile(
            session, tenant=viewer.tenant, user_id=id, entities_limit=entities
        )
    return render(
        request, "profile.html", viewer, profile=profile, entities=entities,
        max_entities=MAX_ENTITIES,
    )  # fmt: skip


@router.get("/user/erase")
async def erase_confirm(
    request: Request, viewer: ReadViewer, id: Annotated[IdentifierPath, Query()]
) -> Response:
    return render(request, "erase.html", viewer, user_id=id)


@router.post("/user/erase")
async def erase(
    request: Request,
    state: StateDep,
    _: CsrfDep,
    viewer: AdminViewer,
    user_id: Annotated[IdentifierPath, Form()],
    confirm: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """The same erasure as DELETE /v1/users/{id}; the typed id guards against a slip."""
    if confirm != user_id:
        return render(
            request, "erase.html", viewer, status_code=422, user_id=user_id,
            error="type the user id exactly to confirm",
        )  # fmt: skip
    receipt = await erase_user_async(
        state.sessions, state.redis, tenant=viewer.tenant, user_id=user_id
    )
    return render(request, "receipt.html", viewer, receipt=receipt)
