"""The console's Jinja environment and its one way to answer with a page.

Autoescape is on for every template, so stored text (a memory, a turn, an error)
renders as text whatever it holds. The Content-Security-Policy admits only the
console's own scripts and styles: even markup that slipped through could not run.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from api.console.auth import COOKIE_PATH, CSRF_COOKIE, Viewer

TEMPLATES: Final = Path(__file__).parent / "templates"

SECURITY_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    # Pages show a user's memories: no shared cache may keep them.
    "Cache-Control": "no-store",
}


def _when(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


environment = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
environment.filters["when"] = _when
environment.filters["num"] = _num


def render(
    request: Request,
    template: str,
    viewer: Viewer | None,
    *,
    status_code: int = 200,
    csrf: str | None = None,
    **context: Any,
) -> HTMLResponse:
    """The template as a page, with the security headers and the CSRF cookie."""
    token = viewer.csrf if viewer else csrf
    body = environment.get_template(template).render(
        request=request, viewer=viewer, csrf=token, **context
    )
    response = HTMLResponse(body, status_code=status_code, headers=SECURITY_HEADERS)
    if token and request.cookies.get(CSRF_COOKIE) != token:
        set_cookie(request, response, CSRF_COOKIE, token, max_age=None)
    return response


def set_cookie(
    request: Request, response: Response, name: str, value: str, *, max_age: int | None
) -> None:
    """A console cookie: HttpOnly, SameSite=Strict, Secure when served over https."""
    response.set_cookie(
        name, value, max_age=max_age, path=COOKIE_PATH, httponly=True, samesite="strict",
        secure=request.url.scheme == "https",
    )  # fmt: skip
