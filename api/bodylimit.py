"""How large a route's body may be, and reading one within that cap and a deadline.

Each route has a cap that fits what it accepts: the batch routes (turns, memories)
take MEMWELL_MAX_BODY_BYTES; a single message (chat, search, context, an edit) takes
what its longest message and metadata can occupy as JSON, escapes included; the OpenAI
door, which stores one message but forwards the app's history with it, takes a few
times that; a route without a body takes a small allowance.
The body is read whole before the app runs, so a body over its cap (declared, or
counted as it streams when chunked) or one slower than MEMWELL_API_BODY_TIMEOUT_S
never reaches the app and never holds a JSON parser.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

from starlette.types import Message, Receive, Scope

from memwell.core.settings import Settings

#: Bodiless requests (GET, DELETE...) may still carry a stray `{}` or a short form.
SMALL_BODY_BYTES: Final = 64 * 1024
#: One code point can take 12 bytes of JSON (a surrogate pair as two \uXXXX escapes).
JSON_BYTES_PER_CHAR: Final = 12
_BULK_ROUTES: Final = frozenset({"/v1/turns", "/v1/memories"})
#: The OpenAI door stores one message, and forwards the history before it: as many
#: messages' worth again as this, which outlasts a model's context window of text.
_FORWARDED_HISTORY_MESSAGES: Final = 3
_HISTORY_ROUTES: Final = frozenset({"/v1/chat/completions"})
_BODILESS: Final = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})


def route_cap(method: str, path: str, settings: Settings) -> int:
    """The most body bytes a request to this route may carry."""
    if method in _BODILESS:
        return SMALL_BODY_BYTES
    route = path.rstrip("/")
    if route in _BULK_ROUTES:
        return settings.max_body_bytes
    one_message = JSON_BYTES_PER_CHAR * (settings.max_message_chars + settings.max_metadata_bytes)
    if route in _HISTORY_ROUTES:
        one_message *= 1 + _FORWARDED_HISTORY_MESSAGES
    return min(settings.max_body_bytes, one_message + SMALL_BODY_BYTES)


def declared_length(scope: Scope) -> int | None:
    """The Content-Length header: None when absent, -1 when malformed."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return -1
            return length if length >= 0 else -1
    return None


class BodyTooLarge(Exception):
    """The body crossed its cap while streaming (a chunked body has no declared size)."""


class ClientGone(Exception):
    """The client disconnected before its body was complete."""


@dataclass(frozen=True)
class Body:
    data: bytes

    def replay(self, receive: Receive) -> Receive:
        """A receive that gives the app this body once, then the client's own events
        (a disconnect, which a streaming response watches for)."""
        given = False

        async def replayed() -> Message:
            nonlocal given
            if given:
                return await receive()
            given = True
            return {"type": "http.request", "body": self.data, "more_body": False}

        return replayed


async def read_body(receive: Receive, *, cap: int, timeout_s: float) -> Body:
    """The whole body, or BodyTooLarge, ClientGone or TimeoutError."""
    chunks: list[bytes] = []
    size = 0
    async with asyncio.timeout(timeout_s):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > cap:
                raise BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return Body(b"".join(chunks))
