"""Hostile clients against the real server (api/server.py's uvicorn configuration):
the key and the declared size are checked before a byte of the body is read; a body
over its cap, chunked or not, is refused as it streams; slow headers and slow bodies
are cut off; failed authentications are rate limited per client address."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import orjson
import pytest
import redis
import redis.asyncio
import uvicorn
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from api.console.auth import CSRF_COOKIE
from api.main import create_app
from api.server import server_config
from memwell.auth.failed_auth import BUCKET_PREFIX, FailedAuthLimiter
from memwell.auth.rate_limit import KEY_PREFIX, RateDecision, RateLimiter
from memwell.core.settings import Settings
from memwell.local.waiting import wait_for
from tests.support.live_api import free_port
from tests.support.problems import assert_problem

EIGHT_MIB = 8 * 1024 * 1024


def _settings(stack_env: dict[str, str], **overrides: Any) -> Settings:
    return Settings(
        database_url=stack_env["DATABASE_URL"], redis_url=stack_env["REDIS_URL"],
        embedding_provider="local", rate_limit_per_s=1000, rate_limit_burst=100_000,
        **overrides,
    )  # fmt: skip


@contextmanager
def _serve(settings: Settings) -> Iterator[tuple[str, int]]:
    port = free_port()
    config = server_config(settings, host="127.0.0.1", port=port, app=create_app(settings))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="hardened-api", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=60, what="uvicorn to start")
        yield "127.0.0.1", port
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@pytest.fixture(scope="module")
def server(stack_env: dict[str, str]) -> Iterator[tuple[str, int]]:
    settings = _settings(stack_env, api_header_timeout_s=1.0, api_body_timeout_s=1.0)
    with _serve(settings) as address:
        yield address


def _raw(address: tuple[str, int], head: bytes, body: bytes = b"") -> socket.socket:
    sock = socket.create_connection(address, timeout=10)
    sock.sendall(head + body)
    return sock


def _response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of the one response on `sock`, read until the server
    closes the connection (every refusal here closes it)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def _head(path: str, *, length: int, key: str | None = None) -> bytes:
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return (f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            f"{auth}Content-Length: {length}\r\n\r\n").encode()  # fmt: skip


def _key(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


def test_an_unauthenticated_8_mib_body_is_refused_before_it_is_sent(
    server: tuple[str, int],
) -> None:
    # Only the headers go out: the answer arrives while the body is still unsent,
    # so the server cannot have read (or parsed) it.
    for key in (None, "mw_" + "x" * 43):
        sock = _raw(server, _head("/v1/turns", length=EIGHT_MIB, key=key))
        status, headers, body = _response(sock)
        assert status == 401 and headers["connection"] == "close"
        assert headers["content-type"].startswith("application/problem+json")
        assert headers["www-authenticate"].startswith("Bearer")
        assert orjson.loads(body)["type"].endswith("/unauthorized")


def test_a_declared_size_over_the_route_cap_is_413_before_the_body(
    server: tuple[str, int], auth_headers: dict[str, str]
) -> None:
    sock = _raw(server, _head("/v1/chat", length=EIGHT_MIB, key=_key(auth_headers)))
    status, headers, body = _response(sock)
    problem = orjson.loads(body)
    assert status == 413 and problem["type"].endswith("/too-large")
    # The chat route's cap is a message's worth, far under the batch routes' 8 MiB.
    assert problem["limit_bytes"] < EIGHT_MIB


def test_a_chunked_body_over_the_cap_is_413_as_it_streams(
    server: tuple[str, int], auth_headers: dict[str, str]
) -> None:
    # No Content-Length: the server counts as the chunks arrive. The body is never
    # finished (no last chunk): the answer must come once the cap is crossed. The
    # client stops there, so the server has read everything sent and closes cleanly
    # (a client that kept sending would meet a reset, as with any server that stops
    # reading).
    head = (f"POST /v1/chat HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            f"{next(iter(auth_headers))}: {auth_headers['Authorization']}\r\n"
            f"Transfer-Encoding: chunked\r\n\r\n").encode()  # fmt: skip
    sock = _raw(server, head)
    sent = 0
    cap = 12 * (32_000 + 16 * 1024) + 64 * 1024  # the chat route's cap at the defaults
    while sent <= cap:
        # Whole chunks up to the cap, then one that ends one byte past it (unframed at
        # its end): the cap is crossed by the last byte sent.
        size = min(65536, cap + 1 - sent)
        last = sent + size > cap
        sock.sendall(f"{size:x}\r\n".encode() + b" " * size + (b"" if last else b"\r\n"))
        sent += size
    status, headers, body = _response(sock)
    problem = orjson.loads(body)
    assert status == 413 and problem["type"].endswith("/too-large")
    assert problem["limit_bytes"] == cap and headers["connection"] == "close"


def test_a_slow_body_is_answered_408(server: tuple[str, int], auth_headers: dict[str, str]) -> None:
    sock = _raw(server, _head("/v1/chat", length=100, key=_key(auth_headers)), b'{"user')
    started = time.monotonic()
    status, headers, body = _response(sock)
    assert status == 408 and orjson.loads(body)["type"].endswith("/request-timeout")
    assert time.monotonic() - started < 5  # the 1 s deadline, not the client's patience


def test_slow_headers_are_cut_off_on_new_and_kept_alive_connections(
    server: tuple[str, int],
) -> None:
    sock = _raw(server, b"GET /healthz HTTP/1.1\r\nHost: test\r\n")
    status, _, _ = _response(sock)
    assert status == 408

    # A second request on a kept-alive connection gets the same deadline.
    sock = _raw(server, b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
    first = sock.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    sock.sendall(b"GET /healthz HTTP/1.1\r\n")
    status, _, _ = _response(sock)
    assert status == 408


def test_failed_authentications_are_rate_limited_per_address(
    stack_env: dict[str, str],
    auth_headers: dict[str, str],
    make_key: Callable[..., dict[str, str]],
) -> None:
    client = redis.Redis.from_url(stack_env["REDIS_URL"])
    bucket = KEY_PREFIX + BUCKET_PREFIX + "127.0.0.1"
    client.delete(bucket)
    settings = _settings(stack_env, auth_fail_per_s=0.05, auth_fail_burst=3)
    try:
        with _serve(settings) as (host, port):
            url = f"http://{host}:{port}/v1/memories?user_id=u"
            # A valid key seen before the flood stays usable: it is never looked up again.
            assert httpx.get(url, headers=auth_headers).status_code == 200
            wrong = {"Authorization": "Bearer mw_" + "y" * 43}
            statuses = [httpx.get(url, headers=wrong).status_code for _ in range(3)]
            assert statuses == [401, 401, 401]
            limited = httpx.get(url, headers=wrong)
            assert_problem(limited, 429, "rate-limited")
            assert int(limited.headers["retry-after"]) >= 1
            assert_problem(httpx.get(url), 429, "rate-limited")  # no key at all: same address
            # A key this server has verified before is still looked up and served; one it
            # never saw is refused unexamined, as a guess would be.
            assert httpx.get(url, headers=auth_headers).status_code == 200
            assert_problem(httpx.get(url, headers=make_key()), 429, "rate-limited")
            # The console's sign-in form shares the limit: no cheaper way to guess.
            form = {"csrf": "t", "key": "mw_" + "z" * 43}
            signin = httpx.post(
                f"http://{host}:{port}/console/login", data=form, cookies={CSRF_COOKIE: "t"}
            )
            assert signin.status_code == 429
            assert int(signin.headers["retry-after"]) >= 1
    finally:
        client.delete(bucket)


def test_the_failed_auth_limit_fails_open_without_redis() -> None:
    async def flood() -> list[RateDecision | None]:
        dead = redis.asyncio.Redis(
            port=free_port(), socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
        )
        limiter = FailedAuthLimiter(RateLimiter(dead, rate_per_s=0.01, burst=1))
        seen = []
        for _ in range(3):
            await limiter.failed("10.0.0.1")
            seen.append(await limiter.blocked("10.0.0.1"))
        await dead.aclose()
        return seen

    assert asyncio.run(flood()) == [None, None, None]


def test_a_well_behaved_client_is_unaffected(
    server: tuple[str, int], auth_headers: dict[str, str], ids: dict[str, str]
) -> None:
    url = f"http://{server[0]}:{server[1]}"
    body = {"user_id": ids["user"], "query": "tea"}
    with httpx.Client(base_url=url, headers=auth_headers, timeout=10) as client:
        for _ in range(3):  # one kept-alive connection, several requests
            assert client.post("/v1/memories/search", json=body).status_code == 200
