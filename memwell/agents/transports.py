"""The MCP server's two transports, each with memwell/agents/unsendable.py in front:
a message holding a lone surrogate is answered with REST's rule before the SDK's
parser sees it.

- stdio: the SDK's stdio transport, reading lines through `_Lines` and writing
  through `_Out` (one lock, so a refusal and the SDK's answers never interleave).
  While it serves, fd 0 reads nothing and fd 1 goes to stderr, as the SDK's own does,
  so stray output never corrupts the wire.
- streamable HTTP: the SDK's app behind `RefusingUnsendable`, an ASGI middleware.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

from memwell.agents.unsendable import refusal

Scope = dict[str, Any]


class _Out:
    """The protocol's output, one write at a time."""

    def __init__(self, file: anyio.AsyncFile[str]) -> None:
        self._file = file
        self._lock = anyio.Lock()

    async def write(self, text: str) -> None:
        async with self._lock:
            await self._file.write(text)

    async def flush(self) -> None:
        async with self._lock:
            await self._file.flush()


class _Lines:
    """The protocol's input lines, less those refused (answered on `out` instead)."""

    def __init__(self, file: anyio.AsyncFile[str], out: _Out) -> None:
        self._file = file
        self._out = out

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self._file:
            answer = refusal(line)
            if answer is None:
                yield line
            elif answer:
                await self._out.write(answer.decode() + "\n")
                await self._out.flush()


@contextmanager
def _protocol_fds() -> Iterator[tuple[int, int]]:
    """Private copies of stdin and stdout for the protocol, fd 0 on the null device and
    fd 1 on stderr meanwhile; both put back afterwards."""
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    try:
        yield protocol_in, protocol_out
    finally:
        os.dup2(protocol_in, 0)
        os.dup2(protocol_out, 1)
        os.close(protocol_in)
        os.close(protocol_out)


async def serve_stdio(server: MCPServer) -> None:
    """`server` over this process's stdin and stdout (MCPServer.run_stdio_async, with
    the refusal in front)."""
    with _protocol_fds() as (fd_in, fd_out):
        reader = open(fd_in, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        writer = open(fd_out, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        with reader, writer:
            out = _Out(anyio.wrap_file(writer))
            lines = _Lines(anyio.wrap_file(reader), out)
            async with stdio_server(stdin=lines, stdout=out) as (read, write):  # type: ignore[arg-type]
                # The SDK's lowlevel server is what run_stdio_async runs on its streams.
                lowlevel = server._lowlevel_server
                await lowlevel.run(read, write, lowlevel.create_initialization_options())


class RefusingUnsendable:
    """ASGI middleware: a POSTed message holding a lone surrogate is answered (200 and
    the JSON-RPC error, or 202 for a notification) without reaching `app`."""

    def __init__(self, app: Any, max_body_bytes: int = DEFAULT_MAX_REQUEST_BODY_SIZE) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, more, messages = b"", True, []
        while more and len(body) <= self.max_body_bytes:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            more = message.get("more_body", False) and message["type"] == "http.request"
        answer = None if more else refusal(body)
        if answer is None:
            await self.app(scope, _replay(messages, receive), send)
            return
        status = 200 if answer else 202
        headers = [(b"content-type", b"application/json")] if answer else []
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": answer})


def _replay(messages: list[dict[str, Any]], receive: Any) -> Any:
    """A `receive` that gives back what was read, then the rest of the request."""
    pending = list(messages)

    async def replayed() -> dict[str, Any]:
        return pending.pop(0) if pending else await receive()

    return replayed


def serve_http(server: MCPServer, *, host: str, port: int) -> None:
    """`server` over streamable HTTP at /mcp (MCPServer.run("streamable-http"), with the
    refusal in front)."""
    app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
    uvicorn.run(RefusingUnsendable(app), host=host, port=port, log_config=None)
