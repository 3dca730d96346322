"""Request ids, access logs and Prometheus metrics for the API.

A pure ASGI middleware (not BaseHTTPMiddleware: it costs a task per request and hides
context variables): it takes the client's X-Request-ID or makes one, binds it to every
log line of the request and to the turns the request enqueues, echoes it in the
response, times the request under its route template, and starts the request's
`after_reply` work (memwell/core/background.py) once the last of the reply is sent.

/metrics is guarded by its own token (MEMWELL_METRICS_TOKEN), not by an API key: a
scraper is no tenant, and the backlog gauges count every tenant's work. Without a
token configured it is not served at all (404), except on a stack with auth
disabled (the local one).
"""

from __future__ import annotations

import asyncio
import hmac
import re
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.deps import StateDep
from memwell.core.background import replying
from memwell.core.errors import NotFound, Unauthorized
from memwell.core.inflight import serving
from memwell.core.logs import REQUEST_ID_HEADER, bound, get_logger, new_request_id
from memwell.core.metrics import (
    HTTP_REQUEST_SECONDS,
    BacklogCollector,
    QueueDepthCollector,
    ReembedCollector,
    render,
    scrape_registry,
)
from memwell.maintenance.status import read_backlog
from memwell.reembed.progress import latest_progress_async

log = get_logger("memwell.api")

_HEADER = REQUEST_ID_HEADER.lower().encode()
#: a client's id is echoed into logs and headers: keep it short and printable
_VALID_ID = re.compile(r"^[A-Za-z0-9._:/+=-]{1,128}$")
_UNTRACKED = frozenset({"/metrics", "/healthz"})


def _client_request_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == _HEADER:
            text = value.decode("latin-1")
            return text if _VALID_ID.match(text) else None
    return None


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _client_request_id(scope) or new_request_id()
        status = {"code": 500}
        started = time.perf_counter()
        with bound(request_id), serving(), replying() as reply_sent:

            async def send_with_id(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status["code"] = message["status"]
                    headers = list(message.get("headers", []))
                    headers.append((_HEADER, request_id.encode()))
                    message = {**message, "headers": headers}
                await send(message)
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    reply_sent()

            try:
                await self.app(scope, receive, send_with_id)
            finally:
                self._record(scope, status["code"], time.perf_counter() - started)

    @staticmethod
    def _record(scope: Scope, status: int, elapsed: float) -> None:
        route: Any = scope.get("route")
        # The template ("/v1/turns/{turn_id}"), never the raw path: ids would explode
        # the label set.
        template = _CONVERTOR.sub(r"{\1}", getattr(route, "path", None) or "unmatched")
        method = scope.get("method", "")
        if template not in _UNTRACKED:
            HTTP_REQUEST_SECONDS.labels(method, template, str(status)).observe(elapsed)
            log.info(
                "request",
                method=method,
                route=template,
                status=status,
                duration_ms=round(elapsed * 1000, 2),
            )


# "{turn_id:path}" is labelled "{turn_id}": the convertor is routing, not the route.
_CONVERTOR = re.compile(r"\{(\w+):\w+\}")

router = APIRouter(tags=["health"])
_scrape_bearer = HTTPBearer(auto_error=False)


def check_scrape_token(
    state: StateDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_scrape_bearer)],
) -> None:
    """Let a scrape through if it carries MEMWELL_METRICS_TOKEN (compared in constant
    time); with no token configured, only a stack with auth disabled serves /metrics."""
    token = state.settings.metrics_token
    if token is None:
        if state.settings.auth_disabled:
            return
        raise NotFound("/metrics is off: set MEMWELL_METRICS_TOKEN to serve it")
    sent = credentials.credentials if credentials is not None else ""
    if not hmac.compare_digest(sent.encode(), token.get_secret_value().encode()):
        raise Unauthorized("send MEMWELL_METRICS_TOKEN as `Authorization: Bearer <token>`")


@router.get("/metrics", include_in_schema=False, dependencies=[Depends(check_scrape_token)])
async def metrics(state: StateDep) -> Response:
    """Prometheus exposition: this API's metrics (every worker process of it in
    multiprocess mode), the queue depths, the backlog and dead letters, and the
    newest re-embed's progress."""
    # The connecting role: the store's backlog is every tenant's, not the caller's.
    async with state.system_sessions() as session:
        pending, oldest_s, letters = await read_backlog(session)
        reembed = ReembedCollector(await latest_progress_async(session))
    backlog = BacklogCollector(pending=pending, oldest_pending_s=oldest_s, dead_letters=letters)
    registry = scrape_registry([QueueDepthCollector(state.chat_broker_url), backlog, reembed])
    body, content_type = await asyncio.to_thread(render, registry)  # Redis + file reads
    return Response(content=body, media_type=content_type)
