"""The served address itself. `memwell up` prints it, so `/` must lead somewhere: a
browser goes on to the console, any other client gets an index of links (JSON)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from memwell import __version__

router = APIRouter(include_in_schema=False)

CONSOLE = "/console"


@router.get("/", response_model=None)
async def home(request: Request) -> Response | dict[str, object]:
    if "text/html" in request.headers.get("accept", ""):
        return RedirectResponse(CONSOLE, status_code=307)
    links = {
        "console": CONSOLE,
        "openapi": request.app.openapi_url,
        "api_docs": request.app.docs_url,
        "health": "/healthz",
        "ready": "/readyz",
    }
    return {
        "service": "memwell",
        "version": __version__,
        "links": {name: path for name, path in links.items() if path},
    }
