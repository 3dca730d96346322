"""The uvicorn server of `memwell api` (api/server.py): its connections, and how many
processes it runs by default."""

from __future__ import annotations

import socket
import threading
from typing import Any

import httpx
import uvicorn

from api.server import HeaderTimeoutProtocol, default_workers, server_config
from memwell.core.settings import Settings
from memwell.local.waiting import wait_for
from tests.support.live_api import free_port


async def _ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def test_connections_on_a_socket_bound_for_several_workers_send_small_writes_at_once() -> None:
    # With --workers N, uvicorn binds the listening socket itself (`proto` 0) and every
    # worker serves it; asyncio then leaves Nagle's algorithm on for the connections.
    nodelay: list[int] = []

    class Probe(HeaderTimeoutProtocol):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            sock = transport.get_extra_info("socket")
            nodelay.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    config = server_config(Settings(), host="127.0.0.1", port=free_port(), app=_ok)
    config.http = Probe
    listener = config.bind_socket()  # as uvicorn's Multiprocess binds it for its workers
    assert listener.proto == 0
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=30, what="uvicorn to start")
        host, port = listener.getsockname()[:2]
        assert httpx.get(f"http://{host}:{port}/").text == "ok"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
    assert nodelay and all(nodelay)


def test_one_api_process_per_two_cores() -> None:
    assert [default_workers(n) for n in (1, 2, 3, 4, 8, 16)] == [1, 1, 1, 2, 4, 8]
    assert default_workers() >= 1
