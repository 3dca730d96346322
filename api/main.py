"""The FastAPI application factory. Run with `memwell api` (uvicorn, factory mode)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api.admission import AdmissionMiddleware
from api.console import install_console
from api.errors import install_error_handlers
from api.observability import RequestContextMiddleware
from api.observability import router as metrics_router
from api.openapi import install_openapi
from api.redaction import install as install_log_redaction
from api.routes import (
    chat,
    health,
    home,
    memories,
    openai_compat,
    reembed,
    sessions,
    turns,
    users,
)
from api.state import build_state
from memwell import __version__
from memwell.core.settings import Settings
from memwell.core.settings_errors import settings_or_exit

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> FastAPI:
    resolved = settings or settings_or_exit()  # uvicorn calls this factory by name

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if resolved.auth_disabled:
            log.warning(
                "AUTH IS DISABLED (MEMWELL_AUTH_DISABLED=true): every caller acts as tenant "
                "%r with every scope. Never expose this API beyond your machine.",
                resolved.default_tenant,
            )
        app.state.memwell = build_state(resolved)
        await app.state.memwell.warm_up()
        try:
            yield
        finally:
            await app.state.memwell.aclose()

    app = FastAPI(title="Memwell", version=__version__, lifespan=lifespan)
    install_error_handlers(app)
    install_log_redaction()
    install_openapi(app)
    app.add_middleware(AdmissionMiddleware, settings=resolved)
    app.add_middleware(RequestContextMiddleware)
    app.include_router(metrics_router)
    for module in (home, health, chat, openai_compat, turns, memories, sessions, users):
        app.include_router(module.router)
    app.include_router(reembed.router)
    install_console(app)
    return app
