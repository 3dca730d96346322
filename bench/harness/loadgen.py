"""A bounded async HTTP load generator: `clients` concurrent loops share one request
budget and one deadline, so a run stops by itself after `count` requests or `time_cap_s`.

Each loop is a well-behaved client: a 503 with Retry-After (the API's admission
control) is counted as refused, not as an error, and the same request is sent again
after the time it names. The generator's own CPU time is measured, so a figure can
tell how much of the machine was left to the server.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import httpx

from bench.harness.common import percentile
from bench.harness.progress import Progress, progress

#: Longest wait a refused client honours (a bad Retry-After must not stall a run).
MAX_RETRY_AFTER_S = 5.0


@dataclass(frozen=True)
class LoadResult:
    clients: int
    latencies_ms: list[float]  # successful attempts only
    errors: dict[str, int]  # status code or exception name -> count; refusals not included
    elapsed_s: float
    #: 503 answers with Retry-After (admission control); each was sent again
    refused: int = 0
    #: CPU seconds the load generator itself used (user + system) during the run
    client_cpu_s: float = 0.0
    #: per served request, from its first attempt to its answer (refusals and waits included)
    end_to_end_ms: list[float] = field(default_factory=list)

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def throughput(self) -> float:
        """Successful requests per second of wall clock."""
        return len(self.latencies_ms) / self.elapsed_s if self.elapsed_s else 0.0

    @property
    def client_cores(self) -> float:
        """Cores the load generator kept busy, on average."""
        return self.client_cpu_s / self.elapsed_s if self.elapsed_s else 0.0

    def p(self, q: float) -> float:
        return percentile(self.latencies_ms, q)


@dataclass
class _Shared:
    """The budget, deadline and results the client loops share (one event loop: no locks)."""

    count: int
    deadline: float
    next: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    end_to_end_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    refused: int = 0


def _retry_after(response: httpx.Response) -> float | None:
    """The wait a 503 asks for, when it asks for one."""
    if response.status_code != 503:
        return None
    try:
        return min(max(float(response.headers["Retry-After"]), 0.0), MAX_RETRY_AFTER_S)
    except (KeyError, ValueError):
        return None


async def _client_loop(
    client: httpx.AsyncClient,
    path: str,
    bodies: Sequence[Mapping[str, str]] | None,
    state: _Shared,
) -> None:
    while state.next < state.count and time.perf_counter() < state.deadline:
        i = state.next
        state.next += 1
        first = time.perf_counter()
        while time.perf_counter() < state.deadline:
            t0 = time.perf_counter()
            try:
                if bodies is None:
                    response = await client.get(path)
                else:
                    response = await client.post(path, json=bodies[i % len(bodies)])
            except httpx.HTTPError as exc:
                state.errors[type(exc).__name__] += 1
                break
            now = time.perf_counter()
            if response.status_code == 200:
                state.latencies_ms.append((now - t0) * 1000)
                state.end_to_end_ms.append((now - first) * 1000)
                break
            wait = _retry_after(response)
            if wait is None:
                state.errors[str(response.status_code)] += 1
                break
            state.refused += 1
            await asyncio.sleep(min(wait, max(0.0, state.deadline - now)))


async def _show(bar: Progress, state: _Shared) -> None:
    while True:
        bar.update(state.next)
        await asyncio.sleep(1)


async def _run(
    url: str,
    path: str,
    *,
    clients: int,
    count: int,
    time_cap_s: float,
    bodies: Sequence[Mapping[str, str]] | None,
    headers: Mapping[str, str],
) -> LoadResult:
    label = f"{'POST' if bodies else 'GET'} {path} x{clients} clients"
    # One client (one connection) per simulated user: httpx's shared pool scans its
    # connections on every request, which made a 200-connection pool the bottleneck.
    # One TLS context for all (never used on plain HTTP): each client loading its own
    # CA bundle cost 20 ms of CPU, 4 s for 200 clients.
    tls = ssl.create_default_context()
    pool = [
        httpx.AsyncClient(base_url=url, headers=dict(headers), timeout=30, verify=tls)
        for _ in range(clients)
    ]
    started = time.perf_counter()
    cpu_started = time.process_time()
    state = _Shared(count=count, deadline=started + time_cap_s)
    bar = progress(label, count)
    shown = asyncio.create_task(_show(bar, state))
    try:
        await asyncio.gather(*(_client_loop(client, path, bodies, state) for client in pool))
    finally:
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        shown.cancel()
        await asyncio.gather(*(client.aclose() for client in pool))
        bar.update(state.next)
        bar.close(f"{len(state.latencies_ms)} ok, {state.refused} refused (503), "
                  f"{sum(state.errors.values())} errors, {elapsed:.1f} s")  # fmt: skip
    return LoadResult(
        clients, state.latencies_ms, dict(state.errors), elapsed, refused=state.refused,
        client_cpu_s=cpu, end_to_end_ms=state.end_to_end_ms,
    )  # fmt: skip


def run_load(
    url: str,
    path: str,
    *,
    clients: int,
    count: int,
    time_cap_s: float,
    bodies: Sequence[Mapping[str, str]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> LoadResult:
    """GET `path` (no bodies) or POST the bodies in turn, from `clients` concurrent loops."""
    return asyncio.run(
        _run(url, path, clients=clients, count=count, time_cap_s=time_cap_s,
             bodies=bodies, headers=headers or {})
    )  # fmt: skip
