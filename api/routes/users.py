"""The tenant's users: the list, one user's counts, and erasure of one user.

Erasure needs the `admin` scope: it is irreversible and reaches every store, so an
app's everyday read/write key cannot wipe users if it leaks. The list's query is a
closed model: a parameter it does not know is refused (422), never silently ignored.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

import api.convertors  # noqa: F401  (registers {name:id})
from api.deps import AdminTenantDep, ReadTenantDep, StateDep
from api.schemas import ErasureReceiptPublic, IdentifierPath
from memwell.db.tenancy import async_tenant_session
from memwell.memories.erasure import erase_user_async
from memwell.users.records import UserDetail, UserPage
from memwell.users.service import MAX_PAGE, get_user, list_users

router = APIRouter(prefix="/v1/users", tags=["users"])

#: Room for any cursor the service issues (an id of 200 non-ASCII characters, escaped).
CURSOR_MAX = 8192


class Page(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=50, ge=1, le=MAX_PAGE)
    cursor: str | None = Field(
        default=None, max_length=CURSOR_MAX, description="The previous page's `next_cursor`."
    )


@router.get("", summary="List the tenant's users with their counts")
async def get_users(
    query: Annotated[Page, Query()], state: StateDep, tenant: ReadTenantDep
) -> UserPage:
    """In user id order, keyset-paged; a user is whoever owns sessions, turns or
    memories."""
    async with async_tenant_session(state.sessions, tenant) as session:
        return await list_users(session, tenant=tenant, limit=query.limit, cursor=query.cursor)


# `:id` (api/convertors.py): user ids may contain "/", which arrives decoded.
@router.get("/{user_id:id}", summary="Read one user's counts")
async def get_one(user_id: IdentifierPath, state: StateDep, tenant: ReadTenantDep) -> UserDetail:
    async with async_tenant_session(state.sessions, tenant) as session:
        return await get_user(session, tenant=tenant, user_id=user_id)


@router.delete("/{user_id:id}", summary="Erase a user everywhere")
async def delete_user(
    user_id: IdentifierPath, state: StateDep, tenant: AdminTenantDep
) -> ErasureReceiptPublic:
    receipt = await erase_user_async(state.sessions, state.redis, tenant=tenant, user_id=user_id)
    return ErasureReceiptPublic.model_validate(receipt, from_attributes=True)
