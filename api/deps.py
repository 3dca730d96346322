"""Annotated dependencies, so routes read like sentences.

Authentication happens before the body is read (api/admission.py), which leaves the
verified `Principal` (tenant, key id, scopes) in the request's scope; the request
body never decides the tenant. A route outside /v1 verifies the key here instead.
Then the key's token bucket is charged, and the tenant is bound to the request's
database sessions (row-level security). With MEMWELL_AUTH_DISABLED every caller is
the default tenant with every scope (local development only).

Scopes: `ReadTenantDep`, `WriteTenantDep` and `AdminTenantDep` say what a route
needs. `TenantDep` picks by method: GET/HEAD need read, anything else write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.admission import principal_of
from api.state import AppState
from memwell.auth.key_cache import verify_key
from memwell.auth.keys import Principal, Scope
from memwell.core.errors import Forbidden, RateLimited, Unauthorized
from memwell.db.tenancy import current_tenant

_bearer = HTTPBearer(auto_error=False, description="An API key: `memwell keys create`.")
ANONYMOUS_KEY_ID = "anonymous"


async def get_state(request: Request) -> AppState:
    # async: FastAPI runs a plain `def` dependency on a worker thread, a hand-off per
    # request for one attribute read.
    state: AppState = request.app.state.memwell
    return state


StateDep = Annotated[AppState, Depends(get_state)]


async def get_principal(
    request: Request,
    state: StateDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Who is calling, charged one request against their rate limit."""
    admitted = principal_of(request.scope)
    if admitted is not None:
        # Verified and charged by the admission middleware, before the body was read.
        principal = admitted
    elif state.settings.auth_disabled:
        principal = Principal(
            tenant=state.settings.default_tenant,
            key_id=ANONYMOUS_KEY_ID,
            scopes=frozenset({"admin"}),
        )
        await _charge(state, principal)
    else:
        if credentials is None:
            raise Unauthorized("send an API key as `Authorization: Bearer <key>`")
        found = await verify_key(state.key_cache, state.system_sessions, credentials.credentials)
        if found is None:
            raise Unauthorized("unknown or revoked API key")
        principal = found
        await _charge(state, principal)
    # Sessions opened for this request without an explicit tenant get this one.
    current_tenant.set(principal.tenant)
    return principal


async def _charge(state: AppState, principal: Principal) -> None:
    if state.limiter is not None:
        decision = await state.limiter.hit(principal.key_id)
        if not decision.allowed:
            raise RateLimited(
                f"rate limit of {state.limiter.rate_per_s:g} requests/s exceeded",
                retry_after_s=decision.retry_after_s,
            )


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def require(scope: Scope) -> Callable[[Principal], Awaitable[str]]:
    """A dependency: the caller's tenant, if its key carries `scope`."""

    async def tenant_with_scope(principal: PrincipalDep) -> str:
        if not principal.allows(scope):
            raise Forbidden(f"this operation needs an API key with the {scope!r} scope")
        return principal.tenant

    return tenant_with_scope


async def get_tenant(request: Request, principal: PrincipalDep) -> str:
    """The caller's tenant; reads need `read`, everything else `write`."""
    scope: Scope = "read" if request.method in ("GET", "HEAD") else "write"
    return await require(scope)(principal)


ReadTenantDep = Annotated[str, Depends(require("read"))]
WriteTenantDep = Annotated[str, Depends(require("write"))]
AdminTenantDep = Annotated[str, Depends(require("admin"))]
TenantDep = Annotated[str, Depends(get_tenant)]
