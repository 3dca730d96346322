"""Console routes answer with pages, errors included.

A domain error raised by a service (not found, conflict, refused scope) becomes an
error page with the status REST would give it; a missing key, the sign-in page. The
same errors elsewhere keep the REST door's problem+json (api/errors.py). Every answer
says its server time in a Server-Timing header.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import quote

from fastapi import Request, Response
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute

from api.console.auth import BadCsrf, SignInRequired, csrf_token
from api.console.templating import render
from api.errors import STATUS_BY_ERROR
from memwell.core.errors import MemwellError, RateLimited, ServiceUnavailable


def _status(exc: MemwellError) -> int:
    if isinstance(exc, BadCsrf):
        return 403
    return next((s for cls, s in STATUS_BY_ERROR.items() if isinstance(exc, cls)), 500)


def error_page(request: Request, exc: MemwellError) -> Response:
    if isinstance(exc, SignInRequired):
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        if request.method != "GET":
            target = "/console"
        return RedirectResponse(f"/console/login?next={quote(target, safe='')}", 303)
    response = render(
        request, "error.html", None, status_code=_status(exc), csrf=csrf_token(request),
        error=str(exc), code=exc.code,
    )  # fmt: skip
    if isinstance(exc, RateLimited | ServiceUnavailable):
        response.headers["Retry-After"] = str(exc.retry_after_s)
    return response


class ConsoleRoute(APIRoute):
    """An APIRoute whose domain errors render as console pages."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            started = time.perf_counter()
            try:
                response = await handler(request)
            except MemwellError as exc:
                response = error_page(request, exc)
            # What the page cost on the server, for the browser's devtools and bench/.
            elapsed_ms = (time.perf_counter() - started) * 1000
            response.headers["Server-Timing"] = f"app;dur={elapsed_ms:.1f}"
            return response

        return handle
