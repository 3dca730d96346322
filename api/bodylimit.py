"""Refuse request bodies over MEMWELL_MAX_BODY_BYTES without reading them whole.

A declared Content-Length over the limit is answered 413 at once, before the app
runs. A body without one (chunked) is counted as it streams; the chunk that crosses
the limit raises a 413 HTTPException, which the error handlers turn into a problem
response, and nothing more is read.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import problem


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and (declared < 0 or declared > self.max_bytes):
            status, title = (400, "Bad Content-Length") if declared < 0 else (413, "Too large")
            response = problem(
                status,
                "bad-request" if status == 400 else "too-large",
                title,
                f"request body is limited to {self.max_bytes} bytes",
            )
            await response(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise HTTPException(413, f"request body is limited to {self.max_bytes} bytes")
            return message

        await self.app(scope, counted, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return -1
    return None
