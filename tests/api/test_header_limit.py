"""MEMWELL_API_MAX_HEADER_BYTES holds however the request line and headers arrive: in
one write (h11's own limit let a whole 60 KB block through) or in many, and whatever
they are made of (the bytes received count, not the headers h11 parses out of them,
which lose the whitespace around their values); an oversize block is 431 with a
problem body, and a block under the limit is served. A request that is not HTTP at all
is refused 400 with a problem body too, not uvicorn's plain text. A refused client that
is still sending is not reset: the server drops what still comes, for a bounded time."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from api.server import LINGER_S
from memwell.core.settings import Settings
from memwell.local.waiting import wait_for
from tests.support.live_api import serve_api

LIMIT = 16 * 1024


@pytest.fixture(scope="module")
def address(stack_env: dict[str, str]) -> Iterator[tuple[str, int]]:
    settings = Settings(api_max_header_bytes=LIMIT)
    assert settings.api_max_header_bytes == LIMIT
    with serve_api(settings) as url:
        parts = urlsplit(url)
        assert parts.hostname and parts.port
        yield parts.hostname, parts.port


def _request(url_bytes: int) -> bytes:
    target = "/healthz?pad=" + "a" * (url_bytes - len("/healthz?pad="))
    return f"GET {target} HTTP/1.1\r\nHost: memwell\r\nConnection: close\r\n\r\n".encode()


def _exchange(address: tuple[str, int], chunks: list[bytes]) -> tuple[int, bytes]:
    """Send `chunks` (each its own write), then read the answer to its end; the status
    and the body. A server that answers before the last chunk may reset the
    connection: what it sent before is still read."""
    with socket.create_connection(address, timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            for chunk in chunks:
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        received = b""
        try:
            while data := sock.recv(65536):
                received += data
        except ConnectionResetError:
            pass
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 "), received[:200]
    return int(head.split()[1]), body


def _assert_refused(status: int, body: bytes) -> None:
    assert status == 431, body
    problem = json.loads(body)
    assert problem["type"].endswith("/headers-too-large") and problem["status"] == 431


def test_a_60_kb_url_in_one_write_is_refused(address: tuple[str, int]) -> None:
    _assert_refused(*_exchange(address, [_request(60 * 1024)]))


def test_a_60_kb_url_in_small_writes_is_refused(address: tuple[str, int]) -> None:
    request = _request(60 * 1024)
    chunks = [request[i : i + 2048] for i in range(0, len(request), 2048)]
    _assert_refused(*_exchange(address, chunks))


def test_a_block_just_over_the_limit_in_one_write_is_refused(address: tuple[str, int]) -> None:
    _assert_refused(*_exchange(address, [_request(LIMIT)]))


def _padded(pad_bytes: int, where: str) -> bytes:
    """A request whose header block is mostly whitespace, which h11 strips from values."""
    pad = " \t" * (pad_bytes // 2)
    header = {"before": f"X-Pad:{pad}x", "after": f"X-Pad: x{pad}"}[where]
    head = f"GET /healthz HTTP/1.1\r\nHost: memwell\r\n{header}\r\nConnection: close\r\n\r\n"
    return head.encode()


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_60_kb_block_of_whitespace_in_one_write_is_refused(
    address: tuple[str, int], where: str
) -> None:
    request = _padded(60 * 1024, where)
    assert len(request) > 60 * 1024 and len(request.split()) == 9  # whitespace, nearly all
    _assert_refused(*_exchange(address, [request]))


def test_a_block_of_whitespace_under_the_limit_is_served(address: tuple[str, int]) -> None:
    status, body = _exchange(address, [_padded(LIMIT - 200, "after")])
    assert status == 200, body


def test_a_10_kb_url_is_served(address: tuple[str, int]) -> None:
    status, body = _exchange(address, [_request(10 * 1024)])
    assert status == 200, body


def test_a_malformed_request_is_a_400_problem(address: tuple[str, int]) -> None:
    status, body = _exchange(
        address, [b"GET /healthz HTTP/1.1\r\nHost: memwell\r\nno colon here\r\n\r\n"]
    )
    assert status == 400, body
    problem = json.loads(body)
    assert problem["type"].endswith("/bad-request") and problem["status"] == 400


def test_a_client_still_sending_its_head_is_not_reset(address: tuple[str, int]) -> None:
    """The server refuses after the first 16 KiB of a 60 KiB head; every later write of
    the client still succeeds (a reset there made clients that stop at a failed send
    lose the refusal), and the 431 arrives, then the end of the stream."""
    request = _request(60 * 1024)
    with socket.create_connection(address, timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(0, len(request), 2048):
            sock.sendall(request[i : i + 2048])  # raises on a reset
            time.sleep(0.002)  # pacing the writes, so the refusal comes mid-head
        received = b""
        while data := sock.recv(65536):
            received += data
    head, _, body = received.partition(b"\r\n\r\n")
    _assert_refused(int(head.split()[1]), body)


def test_a_refused_client_that_never_closes_is_closed(address: tuple[str, int]) -> None:
    """The lingering after a refusal is bounded: a client that reads the 431 and keeps
    sending is cut off within LINGER_S."""
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(_request(LIMIT + 1024))
        received = b""
        while data := sock.recv(65536):
            received += data  # the refusal, then the server's half-close
        assert received.startswith(b"HTTP/1.1 431 ")

        def cut_off() -> bool:
            try:
                sock.sendall(b"x" * 1024)
            except (BrokenPipeError, ConnectionResetError):
                return True
            return False

        wait_for(cut_off, timeout=LINGER_S + 10, interval=0.1, what="the server to close")
