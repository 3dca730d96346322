"""The Memwell Console: server-rendered pages at /console over the same service
functions as the REST door (users, sessions, memories, retrieval, pipeline health).

Templates and static files ship inside this package (vendored htmx, no CDN), so the
console works offline from an installed wheel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from api.console import health, login, memories, search, sessions, users

STATIC: Final = Path(__file__).parent / "static"


def install_console(app: FastAPI) -> None:
    """Serve the console's pages and its static files under /console."""
    app.mount("/console/static", StaticFiles(directory=STATIC), name="console-static")
    for module in (login, users, sessions, memories, search, health):
        app.include_router(module.router)
