"""The tenant's users: the list, one user's counts and profile, and erasure of one user.

Erasure needs the `admin` scope: it is irreversible and reaches every store, so an
app's everyday read/write key cannot wipe users if it leaks. The list's query is a
closed model: a parameter it does not know is refused (422), never silently ignored.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.routing import Match
from starlette.types import Scope

import api.convertors  # noqa: F401  (registers {name:id})
from api.deps import AdminTenantDep, ReadTenantDep, StateDep
from api.schemas import ErasureReceiptPublic, IdentifierPath
from memwell.db.tenancy import async_tenant_session
from memwell.memories.erasure import erase_user_async
from memwell.users.profile import (
    DEFAULT_ENTITIES,
    DEFAULT_RELATIONS,
    MAX_ENTITIES,
    MAX_RELATIONS,
    UserProfile,
    get_profile,
)
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


class ProfileQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entities_limit: int = Field(
        default=DEFAULT_ENTITIES, ge=0, le=MAX_ENTITIES, description="How many top entities."
    )
    relations_limit: int = Field(
        default=DEFAULT_RELATIONS, ge=0, le=MAX_RELATIONS, description="Relations per entity."
    )


class SentSuffixRoute(APIRoute):
    """Matches only when the path's last segment was sent as written: a user id may
    itself end in "/profile" (sent as %2Fprofile, which arrives decoded), and then the
    request is for that user (GET /v1/users/{id}), not for a profile."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        raw = scope.get("raw_path")
        suffix = self.path.rsplit("/", 1)[-1].encode()
        if match is Match.FULL and isinstance(raw, bytes) and not raw.endswith(b"/" + suffix):
            return Match.NONE, {}
        return match, child


async def get_user_profile(
    user_id: IdentifierPath,
    query: Annotated[ProfileQuery, Query()],
    state: StateDep,
    tenant: ReadTenantDep,
) -> UserProfile:
    """Current single-valued facts (lives_in, works_at, ...) by entity, and the most
    mentioned entities with their current relations; superseded values are left out."""
    async with async_tenant_session(state.sessions, tenant) as session:
        return await get_profile(
            session, tenant=tenant, user_id=user_id, entities_limit=query.entities_limit,
            relations_limit=query.relations_limit,
        )  # fmt: skip


# `:id` (api/convertors.py): user ids may contain "/", which arrives decoded. Before
# GET /{user_id}, which would otherwise take ".../profile" as part of the id.
router.add_api_route(
    "/{user_id:id}/profile", get_user_profile, methods=["GET"],
    summary="Read one user's profile: current facts and top entities",
    route_class_override=SentSuffixRoute,
)  # fmt: skip


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
