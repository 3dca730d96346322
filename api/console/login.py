"""Sign in with an API key, and out again."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request, Response
from fastapi.responses import RedirectResponse

from api.console.auth import (
    COOKIE_PATH,
    CSRF_COOKIE,
    KEY_COOKIE,
    KEY_COOKIE_MAX_AGE_S,
    CsrfDep,
    client_address,
    csrf_token,
    principal_for_key,
)
from api.console.routing import ConsoleRoute
from api.console.templating import render, set_cookie
from api.deps import StateDep

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)


def _local(target: str) -> str:
    """Only a console path: a sign-in link must not send the browser elsewhere."""
    ok = target.startswith("/console") and not target.startswith("//")
    return target if ok and "\\" not in target else "/console"


@router.get("/login")
async def login_page(
    request: Request, state: StateDep, next: Annotated[str, Query(max_length=2048)] = "/console"
) -> Response:
    if state.settings.auth_disabled:
        return RedirectResponse(_local(next), 303)
    return render(request, "login.html", None, csrf=csrf_token(request), next=_local(next))


@router.post("/login")
async def login(
    request: Request,
    state: StateDep,
    _: CsrfDep,
    key: Annotated[str, Form(max_length=512)],
    next: Annotated[str, Form(max_length=2048)] = "/console",
) -> Response:
    principal = await principal_for_key(state, key.strip(), client_address(request))
    if principal is None:
        return render(
            request, "login.html", None, status_code=401, csrf=csrf_token(request),
            next=_local(next), error="unknown or revoked API key",
        )  # fmt: skip
    response = RedirectResponse(_local(next), 303)
    set_cookie(request, response, KEY_COOKIE, key.strip(), max_age=KEY_COOKIE_MAX_AGE_S)
    return response


@router.post("/logout")
async def logout(_: CsrfDep) -> Response:
    response = RedirectResponse("/console/login", 303)
    for name in (KEY_COOKIE, CSRF_COOKIE):
        response.delete_cookie(name, path=COOKIE_PATH)
    return response
