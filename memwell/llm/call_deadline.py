"""A total time limit for a model call, not one per read.

httpx bounds each network operation on its own: a read times out only after a
silence as long as the read timeout. An endpoint that drips a byte every few seconds
never goes that quiet, so a call could run until its task's hard limit and hold the
worker that made it. Here every connect, read and write of a client's connections is
bounded by the time left before the deadline of the call in progress (a context
variable, so a call sets it for itself and a thread of another call is not touched).
Past the deadline the next network operation raises httpx's own timeout, which the
openai SDK turns into APITimeoutError: the call ends within moments of its deadline,
whatever the endpoint sends.

The bound sits in the network backend of httpcore (or of the httpcore fork the
installed openai SDK uses): the one layer every read of a body goes through, streamed
or not. httpx does not expose it, so the backend of each of the client's connection
pools is wrapped once, when the client is made; if a later release hides it elsewhere,
the client still works with per-read timeouts only, and says so in a warning
(tests/llm/test_call_deadline.py fails then).
"""

from __future__ import annotations

import importlib
import logging
import ssl
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType
from typing import Any

import openai

log = logging.getLogger(__name__)

_deadline: ContextVar[float | None] = ContextVar("memwell_model_call_deadline", default=None)


@contextmanager
def call_deadline(at: float) -> Iterator[None]:
    """Bound the network work of the calls made inside this block by `at`
    (time.monotonic())."""
    token = _deadline.set(at)
    try:
        yield
    finally:
        _deadline.reset(token)


def _bounded(timeout: float | None, expired: type[Exception]) -> float | None:
    """`timeout`, cut to the time left before the deadline; `expired` once it passed."""
    at = _deadline.get()
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise expired("the model call ran out of time")
    return left if timeout is None else min(timeout, left)


class _BoundedStream:
    """A network stream of httpcore (or of the fork the SDK uses: `core`), bounded."""

    def __init__(self, inner: Any, core: ModuleType) -> None:
        self._inner = inner
        self._core = core

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data: bytes = self._inner.read(max_bytes, _bounded(timeout, self._core.ReadTimeout))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, self._core.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> _BoundedStream:
        bounded = _bounded(timeout, self._core.ConnectTimeout)
        return _BoundedStream(
            self._inner.start_tls(ssl_context, server_hostname, bounded), self._core
        )

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _BoundedBackend:
    """A network backend whose streams keep the deadline of the call in progress."""

    def __init__(self, inner: Any, core: ModuleType) -> None:
        self._inner = inner
        self._core = core

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> _BoundedStream:
        bounded = _bounded(timeout, self._core.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, bounded, local_address, socket_options)
        return _BoundedStream(stream, self._core)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> _BoundedStream:
        bounded = _bounded(timeout, self._core.ConnectTimeout)
        stream = self._inner.connect_unix_socket(path, bounded, socket_options)
        return _BoundedStream(stream, self._core)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def bounded_http_client(*, timeout: float) -> Any:
    """The HTTP client the openai SDK would make for itself (proxies from the
    environment included), whose connections keep the deadline of the call in progress
    (`call_deadline`)."""
    client = openai.DefaultHttpxClient(timeout=timeout)
    transports = [client._transport, *(t for t in client._mounts.values() if t is not None)]
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        core = _core_of(backend)
        if core is None:
            log.warning(
                "this HTTP library keeps its connections elsewhere: model calls are bounded "
                "per read (MEMWELL_LLM_TIMEOUT_S), not in total"
            )
            continue
        pool._network_backend = _BoundedBackend(backend, core)  # type: ignore[union-attr]
    return client


def _core_of(backend: object) -> ModuleType | None:
    """The httpcore-like package `backend` comes from, when it has the timeouts to raise."""
    if backend is None:
        return None
    core = importlib.import_module(type(backend).__module__.split(".")[0])
    wanted = ("ReadTimeout", "WriteTimeout", "ConnectTimeout")
    return core if all(hasattr(core, name) for name in wanted) else None
