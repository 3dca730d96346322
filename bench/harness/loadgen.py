"""A bounded async HTTP load generator: `clients` concurrent loops share one request
budget and one deadline, so a run stops by itself after `count` requests or `time_cap_s`.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import httpx

from bench.harness.common import percentile


@dataclass(frozen=True)
class LoadResult:
    clients: int
    latencies_ms: list[float]  # successful requests only
    errors: dict[str, int]  # status code or exception name -> count
    elapsed_s: float

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def throughput(self) -> float:
        """Successful requests per second of wall clock."""
        return len(self.latencies_ms) / self.elapsed_s if self.elapsed_s else 0.0

    def p(self, q: float) -> float:
        return percentile(self.latencies_ms, q)


@dataclass
class _Shared:
    """The budget, deadline and results the client loops share (one event loop: no locks)."""

    count: int
    deadline: float
    next: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)


async def _client_loop(
    client: httpx.AsyncClient,
    path: str,
    bodies: Sequence[Mapping[str, str]] | None,
    state: _Shared,
) -> None:
    while state.next < state.count and time.perf_counter() < state.deadline:
        i = state.next
        state.next += 1
        t0 = time.perf_counter()
        try:
            if bodies is None:
                response = await client.get(path)
            else:
                response = await client.post(path, json=bodies[i % len(bodies)])
        except httpx.HTTPError as exc:
            state.errors[type(exc).__name__] += 1
            continue
        if response.status_code == 200:
            state.latencies_ms.append((time.perf_counter() - t0) * 1000)
        else:
            state.errors[str(response.status_code)] += 1


async def _progress(label: str, state: _Shared) -> None:
    while True:
        print(f"\r  {label}: {state.next}/{state.count}", end="", file=sys.stderr, flush=True)
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
    pool = [
        httpx.AsyncClient(base_url=url, headers=dict(headers), timeout=30) for _ in range(clients)
    ]
    started = time.perf_counter()
    state = _Shared(count=count, deadline=started + time_cap_s)
    progress = asyncio.create_task(_progress(label, state))
    try:
        await asyncio.gather(*(_client_loop(client, path, bodies, state) for client in pool))
    finally:
        elapsed = time.perf_counter() - started
        progress.cancel()
        await asyncio.gather(*(client.aclose() for client in pool))
    print(f"\r  {label}: {len(state.latencies_ms)} ok, {sum(state.errors.values())} errors,"
          f" {elapsed:.1f} s", file=sys.stderr)  # fmt: skip
    return LoadResult(clients, state.latencies_ms, dict(state.errors), elapsed)


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
