"""The real API served by uvicorn on a free loopback port, in a thread of the test
process, with `memwell api`'s protocol, limits and timeouts (api/server.py): for
clients that must talk real HTTP (the SDK, the MCP server, a raw socket)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from memwell.core.settings import Settings, get_settings
from memwell.local.waiting import wait_for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serve_api(settings: Settings | None = None) -> Iterator[str]:
    """The API on a free loopback port; `settings` default to the test stack's."""
    from api.main import create_app
    from api.server import server_config

    resolved = settings or get_settings()
    port = free_port()
    config = server_config(resolved, host="127.0.0.1", port=port, app=create_app(resolved))
    config.lifespan = "on"
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="live-api", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=60, what="uvicorn to start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
