"""The uvicorn server of `memwell api`: one place for its protocol, limits and timeouts.

uvicorn times out an idle keep-alive connection, but not one that sends its headers
slowly: a client dribbling a header line every few seconds holds its connection (and
a file descriptor) forever. `HeaderTimeoutProtocol` gives every request's header block
a deadline, from the connection's start or from the first byte after a response,
and closes the connection with a 408 when it passes. The body has its own deadline,
enforced in the app (api/admission.py), where the route's size cap is known.

The protocol is h11's (pure Python, the one uvicorn picks without httptools). Its own
limit on a header block counts only a block still incomplete after a read, so a whole
oversize block in one write went through; `HeadLimitedConnection` measures every
request's line and headers, however they arrived, against MEMWELL_API_MAX_HEADER_BYTES.
It counts the bytes received, not the parsed headers: h11 strips the whitespace around
header values, so a block padded with whitespace measured a fraction of what it cost
to receive and parse. Either way an oversize block is answered 431 with a problem
body, and closed; so is a request that is not HTTP (400), where uvicorn answered in
plain text. The close after any of these refusals lingers (see `_refuse`), so a client
still sending reads the answer instead of a reset.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from typing import Any, Final

import h11
import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.supervisors import Multiprocess

from memwell.core.metrics import MULTIPROC_ENV
from memwell.core.metrics_dir import fresh_metrics_dir
from memwell.core.settings import Settings

APP: Final = "api.main:create_app"
#: A request's line and headers, at most, when the config does not say (h11's default).
MAX_HEAD_BYTES: Final = 16 * 1024
#: After a refusal, how long and how much of what the client is still sending is read
#: and dropped before the connection closes.
LINGER_S: Final = 2.0
LINGER_BYTES: Final = 1024 * 1024


def _refusal(status: int, reason: str, code: str, title: str, detail: str) -> bytes:
    """A whole response the protocol writes itself, before any route: a problem body,
    as the app's handlers give, and `Connection: close`."""
    body = json.dumps(
        {"type": f"https://memwell.dev/problems/{code}", "title": title, "status": status,
         "detail": detail}, separators=(",", ":"),
    ).encode()  # fmt: skip
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/problem+json\r\n"
        f"connection: close\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


_TIMEOUT_RESPONSE: Final = _refusal(
    408, "Request Timeout", "request-timeout", "Request timeout",
    "the request headers did not arrive in time",
)  # fmt: skip
_TOO_LARGE_RESPONSE: Final = _refusal(
    431, "Request Header Fields Too Large", "headers-too-large",
    "Request header fields too large",
    "the request line and headers are over MEMWELL_API_MAX_HEADER_BYTES",
)  # fmt: skip
_MALFORMED_RESPONSE: Final = _refusal(
    400, "Bad Request", "bad-request", "Bad request", "the request is not valid HTTP/1.1"
)


class HeadLimitedConnection(h11.Connection):
    """h11's server connection that refuses a request whose line and headers are over
    `max_head_bytes` (h11's own check sees only an incomplete block), and remembers the
    status a refused request asks for."""

    def __init__(self, max_head_bytes: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        self.max_head_bytes = max_head_bytes
        self.refused_status: int | None = None

    def next_event(self) -> Any:
        # What h11 holds unparsed before and after: a request's head is what its parse
        # took off the buffer, byte for byte, whitespace and folded lines included.
        unparsed = len(self._receive_buffer)
        try:
            event = super().next_event()
            received = unparsed - len(self._receive_buffer)
            if isinstance(event, h11.Request) and received > self.max_head_bytes:
                raise h11.RemoteProtocolError("request head too large", error_status_hint=431)
        except h11.RemoteProtocolError as exc:
            self.refused_status = exc.error_status_hint
            raise
        return event


class ApiConfig(uvicorn.Config):
    """uvicorn's Config plus the header deadline (a module-level class: with several
    workers the config is pickled into each process)."""

    def __init__(self, app: Any, *, header_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.header_timeout_s = header_timeout_s


class HeaderTimeoutProtocol(H11Protocol):
    """h11's protocol, with a deadline on every request's header block and a limit on
    its size."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.conn = HeadLimitedConnection(config.h11_max_incomplete_event_size or MAX_HEAD_BYTES)
        self.header_timeout_s: float = getattr(config, "header_timeout_s", 10.0)
        self._header_timer: asyncio.TimerHandle | None = None
        self._linger_timer: asyncio.TimerHandle | None = None
        self._linger_left: int | None = None  # bytes still dropped; None: not refused

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        _no_delay(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._linger_left is not None:
            self._linger_left -= len(data)
            if self._linger_left <= 0:
                self.transport.close()
            return
        if self._awaiting_headers():
            self._arm()  # the first byte of a keep-alive connection's next request
        super().data_received(data)
        if not self._awaiting_headers():
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        # uvicorn answers every malformed request 400 in plain text; here an oversize
        # head is 431, and either is a problem body like every other refusal.
        too_large = getattr(self.conn, "refused_status", None) == 431
        self._refuse(_TOO_LARGE_RESPONSE if too_large else _MALFORMED_RESPONSE)

    def _awaiting_headers(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expire(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or not self._awaiting_headers():
            return
        self._refuse(_TIMEOUT_RESPONSE)

    def _refuse(self, response: bytes) -> None:
        """Write `response`, then close without a reset. A socket closed with unread
        bytes answers the client's next ones with RST: a client still sending its
        oversize head got a broken pipe, and one that stops at a failed send never
        read the refusal. So the server half-closes (FIN after the response) and reads
        and drops what still comes, until the client closes its side, for at most
        LINGER_S and LINGER_BYTES."""
        self._disarm()
        self.transport.write(response)
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self._linger_left = LINGER_BYTES
        self._linger_timer = self.loop.call_later(LINGER_S, self.transport.close)


def _no_delay(transport: asyncio.Transport) -> None:
    """Send small writes at once (TCP_NODELAY). asyncio sets it only on sockets whose
    `proto` says TCP, and the listening socket uvicorn binds for several workers says 0:
    there, the body written after the head waited for the client's delayed ACK, 40 ms
    on every response."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def default_workers(cores: int | None = None) -> int:
    """API processes when neither `--workers` nor MEMWELL_API_WORKERS says: one per two
    cores of this process's CPU set.

    On 2 cores at 50 clients, one process served 171-173 chats/s at p95 401-426 ms (its
    loop thread at 0.58 of a core, its query-embedding thread at 0.39); two served
    179-198 at p95 524-635 ms (and in an earlier run 124 against 133): about as many
    chats, a worse p95 (keep-alive connections stay with the process that accepted
    them, and two processes split them unevenly), twice the model in memory. docs/operations.md,
    "API processes".
    """
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return max(1, (cores or os.cpu_count() or 1) // 2)


def server_config(
    settings: Settings,
    *,
    host: str | None = None,
    port: int | None = None,
    workers: int = 1,
    app: Any = APP,
) -> ApiConfig:
    """uvicorn's configuration for the API: the app (by default its factory, by name;
    a test may pass an app object), its protocol, limits and timeouts."""
    return ApiConfig(
        app,
        header_timeout_s=settings.api_header_timeout_s,
        factory=isinstance(app, str),
        host=host or settings.api_host,
        port=port or settings.api_port,
        workers=workers,
        http=HeaderTimeoutProtocol,
        timeout_keep_alive=settings.api_keep_alive_s,
        h11_max_incomplete_event_size=settings.api_max_header_bytes,
        limit_concurrency=settings.api_limit_concurrency or None,
        log_level=settings.log_level.lower(),
        log_config=None,  # keep memwell.core.logs' JSON handler; uvicorn's would replace it
        access_log=False,  # the request middleware logs each request, with its id
    )


def run(
    settings: Settings,
    *,
    host: str | None = None,
    port: int | None = None,
    workers: int | None = None,
) -> None:
    """Serve the API until stopped (`memwell api`); `workers` unset: MEMWELL_API_WORKERS,
    else `default_workers()`."""
    workers = workers or settings.api_workers or default_workers()
    if workers > 1 and not os.environ.get(MULTIPROC_ENV):
        # Several processes answer /metrics in turn: aggregate them (multiprocess mode).
        os.environ[MULTIPROC_ENV] = str(fresh_metrics_dir(settings.data_dir))
    config = server_config(settings, host=host, port=port, workers=workers)
    if workers > 1:
        Multiprocess(config, sockets=[config.bind_socket()]).run()
        return
    server = uvicorn.Server(config)
    server.run()
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)
