"""Who is looking at the console, and whether a form really came from it.

Sign-in takes an API key, checks it exactly as the REST door does (the same key
lookup, cache and rate limit), and keeps it in an HttpOnly, SameSite=Strict cookie
(Secure over https), so page scripts never see it. With MEMWELL_AUTH_DISABLED the
console opens as the default tenant with every scope, as the REST door does.

Forms carry a CSRF token that must equal the one in a second cookie (double submit);
with SameSite=Strict cookies and an Origin check, a page elsewhere cannot post here.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from typing import Annotated, Final
from urllib.parse import urlsplit

from fastapi import Depends, Form, Request

from api.deps import ANONYMOUS_KEY_ID, StateDep
from api.state import AppState
from memwell.auth.failed_auth import verify_or_charge
from memwell.auth.keys import Principal, Scope
from memwell.core.errors import Forbidden, MemwellError, RateLimited
from memwell.db.tenancy import current_tenant

KEY_COOKIE: Final = "mw_console_key"
CSRF_COOKIE: Final = "mw_console_csrf"
COOKIE_PATH: Final = "/console"
#: a browser session's sign-in lasts at most this long
KEY_COOKIE_MAX_AGE_S: Final = 12 * 3600


class SignInRequired(MemwellError):
    """No usable key: the console answers with its sign-in page."""

    code = "sign-in-required"


class BadCsrf(MemwellError):
    """A form without the console's CSRF token, or from another origin."""

    code = "csrf"


@dataclass(frozen=True)
class Viewer:
    """The signed-in caller of one console request."""

    principal: Principal
    csrf: str
    #: False when auth is disabled: nothing to sign out of
    signed_in: bool

    @property
    def tenant(self) -> str:
        return self.principal.tenant

    def can(self, scope: Scope) -> bool:
        return self.principal.allows(scope)


async def principal_for_key(state: AppState, key: str, address: str) -> Principal | None:
    """The key's principal, through the same cache, lookup and failed-authentication
    limit per client address as the REST door: a sign-in form or a forged cookie is
    no cheaper way to guess keys than the API."""
    return await verify_or_charge(
        state.key_cache, state.system_sessions, key, address=address, failures=state.failed_auth
    )


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def csrf_token(request: Request) -> str:
    """The browser's CSRF token, or a new one that the response must set."""
    return request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)


async def get_viewer(request: Request, state: StateDep) -> Viewer:
    """The caller, charged one request against their key's rate limit."""
    if state.settings.auth_disabled:
        principal = Principal(
            tenant=state.settings.default_tenant,
            key_id=ANONYMOUS_KEY_ID,
            scopes=frozenset({"admin"}),
        )
    else:
        key = request.cookies.get(KEY_COOKIE)
        found = await principal_for_key(state, key, client_address(request)) if key else None
        if found is None:
            raise SignInRequired("sign in with an API key")
        principal = found
    if state.limiter is not None:
        decision = await state.limiter.hit(principal.key_id)
        if not decision.allowed:
            raise RateLimited("rate limit exceeded", retry_after_s=decision.retry_after_s)
    # The services' tenant-bound sessions read the tenant from here, as for REST.
    current_tenant.set(principal.tenant)
    return Viewer(
        principal=principal,
        csrf=csrf_token(request),
        signed_in=not state.settings.auth_disabled,
    )


ViewerDep = Annotated[Viewer, Depends(get_viewer)]


def same_origin(request: Request) -> bool:
    """A browser's Origin (sent with every POST) names this host, or is absent."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == request.headers.get("host", "")


def check_csrf(request: Request, csrf: Annotated[str, Form()] = "") -> None:
    """Refuse a form whose token is not the browser's cookie, or from another origin."""
    expected = request.cookies.get(CSRF_COOKIE, "")
    if not (expected and hmac.compare_digest(expected, csrf) and same_origin(request)):
        raise BadCsrf("the form expired or came from another site: reload the page")


def require(scope: Scope) -> object:
    """A dependency: the viewer, if their key carries `scope`; forms also pass CSRF."""

    async def viewer_with_scope(viewer: ViewerDep) -> Viewer:
        if not viewer.can(scope):
            raise Forbidden(f"this needs an API key with the {scope!r} scope")
        return viewer

    return Depends(viewer_with_scope)


CsrfDep = Annotated[None, Depends(check_csrf)]
ReadViewer = Annotated[Viewer, require("read")]
WriteViewer = Annotated[Viewer, require("write")]
AdminViewer = Annotated[Viewer, require("admin")]
