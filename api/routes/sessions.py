"""Sessions of a user: list, read (row and buffer), close now, delete.

Deleting needs the `admin` scope, like erasing a user: it is irreversible and may take
the session's memories with it. Each operation's query is a closed model: a parameter
the operation does not know is refused (422), never silently ignored.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

import api.convertors  # noqa: F401  (registers {name:id})
from api.deps import AdminTenantDep, ReadTenantDep, StateDep, WriteTenantDep
from api.schemas import IdentifierPath
from memwell.db.tenancy import async_tenant_session
from memwell.intake.turns import Identifier
from memwell.sessions.records import SessionDeletion, SessionDetail, SessionPage
from memwell.sessions.service import (
    MAX_PAGE,
    close_session,
    delete_session,
    get_session,
    list_sessions,
)

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])

#: Room for any cursor the service issues (ids of 200 non-ASCII characters, escaped).
CURSOR_MAX = 8192


class OfUser(BaseModel):
    """Whose session: session ids are the client's, unique per user."""

    model_config = ConfigDict(extra="forbid")

    user_id: Identifier


class PageOfUser(OfUser):
    limit: int = Field(default=50, ge=1, le=MAX_PAGE)
    cursor: str | None = Field(
        default=None, max_length=CURSOR_MAX, description="The previous page's `next_cursor`."
    )


class DeleteOfUser(OfUser):
    with_memories: bool = Field(
        default=False, description="Also delete the memories the session produced."
    )


@router.get("", summary="List a user's sessions, newest activity first")
async def get_sessions(
    query: Annotated[PageOfUser, Query()], state: StateDep, tenant: ReadTenantDep
) -> SessionPage:
    """Keyset-paged: sessions that start between two pages never shift the next one."""
    async with async_tenant_session(state.sessions, tenant) as session:
        return await list_sessions(
            session, tenant=tenant, user_id=query.user_id, limit=query.limit,
            cursor=query.cursor,
        )  # fmt: skip


# `:id` (api/convertors.py): session ids may contain "/", which arrives decoded.
@router.get("/{session_id:id}", summary="Read a session: its stored row and its buffer")
async def get_one(
    session_id: IdentifierPath,
    query: Annotated[OfUser, Query()],
    state: StateDep,
    tenant: ReadTenantDep,
) -> SessionDetail:
    async with async_tenant_session(state.sessions, tenant) as session:
        return await get_session(
            session, buffer=state.chat.buffer, tenant=tenant, user_id=query.user_id,
            session_id=session_id,
        )  # fmt: skip


@router.post("/{session_id:id}/close", summary="Summarize and close a session now")
async def post_close(
    session_id: IdentifierPath,
    query: Annotated[OfUser, Query()],
    state: StateDep,
    tenant: WriteTenantDep,
) -> SessionDetail:
    """What the idle job does, without waiting for it: the summary, status `closed`,
    and an empty buffer. A later turn in the session reopens it."""
    async with async_tenant_session(state.sessions, tenant) as session:
        return await close_session(
            session, buffer=state.chat.buffer, tenant=tenant, user_id=query.user_id,
            session_id=session_id,
        )  # fmt: skip


@router.delete("/{session_id:id}", summary="Delete a session (and, if asked, its memories)")
async def delete_one(
    session_id: IdentifierPath,
    query: Annotated[DeleteOfUser, Query()],
    state: StateDep,
    tenant: AdminTenantDep,
) -> SessionDeletion:
    """Its buffer and summary, turns and row go; the memories it produced stay unless
    `with_memories=true` (then they go with their history, as in user erasure)."""
    async with async_tenant_session(state.sessions, tenant) as session:
        return await delete_session(
            session, buffer=state.chat.buffer, tenant=tenant, user_id=query.user_id,
            session_id=session_id, with_memories=query.with_memories,
        )  # fmt: skip
