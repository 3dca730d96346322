"""Hostile clients against a real API process: what they cost the service, seen by an
honest client.

The API runs as a subprocess (`memwell api`, so api/server.py's protocol, limits
and timeouts) on throwaway Postgres and Valkey. An authenticated probe searches the
memories of one user in a loop, first alone (the baseline), then under each attack:

- large bodies: 30 concurrent clients, each sending an 8 MiB JSON body without a
  valid key (half none, half a wrong one), again and again: once a second each (the
  pace at which such bodies were read before), then as fast as the refusals come
  back (a flood of connections, a thousand a second; reported, not held to the
  latency goal: its clients take about a core of the two themselves);
- slow clients: 1,000 connections that send their headers a line every 2 s, and
  300 authenticated ones that send a 1,000-byte body a byte a second.

Per phase it reports the probe's p50 and p95, the API's RSS before and at its peak,
and what the attackers got: statuses, and how long a slow connection was kept.
Goals, in the same run: probe p95 under attack within 2x the baseline's, RSS growth
at most 100 MB.
"""

from __future__ import annotations

import asyncio
import collections
import multiprocessing
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import psutil

from bench.harness.api_server import serve_api
from bench.harness.chat_stack import admin_headers
from bench.harness.host import describe_host
from bench.harness.procmem import proc_mem
from bench.harness.stack import percentile, services

EIGHT_MIB = 8 * 1024 * 1024
LARGE_BODY_CLIENTS = 30
SLOW_HEADER_CLIENTS = 1000
SLOW_BODY_CLIENTS = 300
PROBE_USER = "probe-user"
API_ENV = {"MEMWELL_RATE_LIMIT_PER_S": "100000", "MEMWELL_RATE_LIMIT_BURST": "1000000"}


@dataclass
class Phase:
    name: str
    probe_ms: list[float] = field(default_factory=list)
    probe_errors: int = 0
    rss_before_mb: float = 0.0
    rss_peak_mb: float = 0.0
    rss_after_mb: float = 0.0
    attack: collections.Counter[str] = field(default_factory=collections.Counter)
    held_s: list[float] = field(default_factory=list)  # how long a slow client was kept
    api_cpu_pct: float = 0.0  # of one core, over the phase
    attackers_cpu_pct: float = 0.0
    #: held to the goals; a phase whose load generator takes a core of the host's two
    #: itself measures the host, not the service, and is reported beside them
    goal: bool = True

    def p(self, q: float) -> float:
        return percentile(self.probe_ms, q) if self.probe_ms else float("nan")


async def _probe(url: str, headers: dict[str, str], phase: Phase, stop: asyncio.Event) -> None:
    body = {"user_id": PROBE_USER, "query": "what does the user like to drink?"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                response = await client.post("/v1/memories/search", json=body)
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok:
                phase.probe_ms.append((time.perf_counter() - started) * 1000)
            else:
                phase.probe_errors += 1
            await asyncio.sleep(0.05)


async def _watch_rss(pid: int, phase: Phase, stop: asyncio.Event) -> None:
    while not stop.is_set():
        phase.rss_peak_mb = max(phase.rss_peak_mb, proc_mem(pid).rss_mb)
        await asyncio.sleep(0.25)


async def _status_of(reader: asyncio.StreamReader) -> str:
    line = await reader.readline()
    parts = line.split()
    return parts[1].decode() if len(parts) > 1 else "closed"


async def _large_body(
    host: str, port: int, index: int, phase: Phase, stop: asyncio.Event, *, every_s: float = 0.0
) -> None:
    """Send an 8 MiB body without a valid key, again and again: at once after each
    answer (a flood of refused connections), or at most once per `every_s`."""
    auth = b"" if index % 2 else b"Authorization: Bearer mw_" + b"x" * 43 + b"\r\n"
    head = (b"POST /v1/turns HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            + auth + f"Content-Length: {EIGHT_MIB}\r\n\r\n".encode())  # fmt: skip
    chunk = b'{"turns": [' + b" " * (1024 * 1024 - 11)
    while not stop.is_set():
        started = time.monotonic()
        try:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(head)
            sender = asyncio.ensure_future(_send_body(writer, chunk))
            phase.attack[f"large body: {await _status_of(reader)}"] += 1
            sender.cancel()
            writer.close()
        except OSError:
            phase.attack["large body: connection error"] += 1
        await asyncio.sleep(max(0.0, every_s - (time.monotonic() - started)))


async def _send_body(writer: asyncio.StreamWriter, chunk: bytes) -> None:
    try:
        for _ in range(8):
            writer.write(chunk)
            await writer.drain()
    except OSError:
        pass  # the server answered and closed: the rest of the body is never read


async def _slow(
    host: str, port: int, head: bytes, trickle: bytes, every_s: float, kind: str, phase: Phase
) -> None:
    started = time.monotonic()
    try:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(head)
        read = asyncio.ensure_future(_status_of(reader))
        while not read.done():
            await asyncio.wait([read], timeout=every_s)
            if not read.done():
                writer.write(trickle)
                await writer.drain()
        status = read.result()
        writer.close()
    except OSError:
        status = "reset"
    phase.attack[f"{kind}: {status}"] += 1
    phase.held_s.append(time.monotonic() - started)


def _attackers_main(kind: str, host: str, port: int, key: str, seconds: float, out: Any) -> None:
    """A child process: the attack of `kind` for `seconds`; sends back what it saw. The
    attackers get their own process (and GIL), so their client-side work never shows
    up as the probe's latency."""
    phase = Phase(kind)

    async def attack() -> None:
        stop = asyncio.Event()
        tasks = [asyncio.ensure_future(a) for a in _attackers(kind, host, port, key, phase, stop)]
        await asyncio.sleep(seconds)
        stop.set()
        if tasks:
            await asyncio.wait(tasks, timeout=60)

    asyncio.run(attack())
    out.send((dict(phase.attack), phase.held_s))
    out.close()


def _attackers(
    kind: str, host: str, port: int, key: str, phase: Phase, stop: asyncio.Event
) -> Sequence[Awaitable[None]]:
    if kind == "large":
        return [_large_body(host, port, i, phase, stop) for i in range(LARGE_BODY_CLIENTS)]
    if kind == "large-paced":
        return [_large_body(host, port, i, phase, stop, every_s=1.0)
                for i in range(LARGE_BODY_CLIENTS)]  # fmt: skip
    if kind == "slow":
        slow_header = b"POST /v1/chat HTTP/1.1\r\nHost: bench\r\n"
        auth = f"Authorization: Bearer {key}\r\n".encode()
        slow_body = (b"POST /v1/chat HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                     + auth + b"Content-Length: 1000\r\n\r\n")  # fmt: skip
        return [_slow(host, port, slow_header, b"X-Slow: 1\r\n", 2.0, "slow headers", phase)
                for _ in range(SLOW_HEADER_CLIENTS)] + [
                _slow(host, port, slow_body, b" ", 1.0, "slow body", phase)
                for _ in range(SLOW_BODY_CLIENTS)]  # fmt: skip
    return []


async def _run_phase(
    phase: Phase, kind: str, url: str, pid: int, headers: dict[str, str], seconds: float
) -> None:
    host, port = url.removeprefix("http://").split(":")
    key = headers["Authorization"].removeprefix("Bearer ")
    phase.rss_before_mb = phase.rss_peak_mb = proc_mem(pid).rss_mb
    receive, send = multiprocessing.Pipe(duplex=False)
    child = multiprocessing.get_context("spawn").Process(
        target=_attackers_main, args=(kind, host, int(port), key, seconds, send)
    )
    api = psutil.Process(pid)
    api_cpu = sum(api.cpu_times()[:2])
    child.start()
    attackers = psutil.Process(child.pid)
    stop = asyncio.Event()
    tasks = [asyncio.ensure_future(_probe(url, headers, phase, stop)),
             asyncio.ensure_future(_watch_rss(pid, phase, stop))]  # fmt: skip
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.wait(tasks, timeout=60)
    phase.api_cpu_pct = 100 * (sum(api.cpu_times()[:2]) - api_cpu) / seconds
    try:  # the attackers stop on their own clock; they may be gone already
        phase.attackers_cpu_pct = 100 * sum(attackers.cpu_times()[:2]) / seconds
    except psutil.NoSuchProcess:
        phase.attackers_cpu_pct = float("nan")
    if not await asyncio.to_thread(receive.poll, 90):
        child.kill()
        raise RuntimeError(f"the {kind} attackers did not report; exit code {child.exitcode}")
    attack, held = receive.recv()
    await asyncio.to_thread(child.join, 60)
    phase.attack.update(attack)
    phase.held_s = held
    phase.rss_after_mb = proc_mem(pid).rss_mb


async def _seed(url: str, headers: dict[str, str]) -> None:
    facts = ["The user drinks green tea every morning.", "The user likes espresso after lunch.",
             "The user is allergic to peanuts.", "The user lives in Porto.",
             "The user plays the cello on Sundays."] * 4  # fmt: skip
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        response = await client.post(
            "/v1/memories",
            json={"user_id": PROBE_USER, "memories": [{"content": f} for f in facts]},
        )
        response.raise_for_status()
        for _ in range(20):  # warm the query path before the baseline
            await client.post("/v1/memories/search", json={"user_id": PROBE_USER, "query": "tea"})


async def _attack(url: str, pid: int, headers: dict[str, str], seconds: float) -> list[Phase]:
    await _seed(url, headers)
    plan = [
        (Phase("baseline (probe alone)"), "none", seconds),
        (Phase(f"{LARGE_BODY_CLIENTS} x 8 MiB unauth, 1/s each"), "large-paced", seconds),
        (Phase(f"{LARGE_BODY_CLIENTS} x 8 MiB unauth, flood *", goal=False), "large", seconds),
        # Long enough for the body deadline (30 s) to cut the slow bodies off.
        (Phase(f"{SLOW_HEADER_CLIENTS} slow-header + {SLOW_BODY_CLIENTS} slow-body"), "slow",
         max(seconds, 40.0)),
        # The host is shared: a second baseline shows how much the background moved.
        (Phase("baseline again (probe alone)"), "none", seconds),
    ]  # fmt: skip
    for phase, kind, length in plan:
        print(f"== {phase.name}: {length:.0f} s", flush=True)
        await _run_phase(phase, kind, url, pid, headers, length)
    return [phase for phase, _, _ in plan]


def run_attacks(seconds: float) -> tuple[list[Phase], bool]:
    """Serve the API on throwaway services, run the phases, print the table; returns
    the phases and whether the goals were met."""
    with services() as stack:
        headers = admin_headers(stack.database_url)
        with serve_api(stack, env=API_ENV) as api:
            phases = asyncio.run(_attack(api.url, api.pid, headers, seconds))
    return phases, report(phases)


def report(phases: list[Phase]) -> bool:
    base = phases[0]
    print(f"\nhost: {describe_host()}")
    print(f"{'phase':<36}{'probes':>7}{'errors':>7}{'p50 ms':>9}{'p95 ms':>9}{'p95/base':>9}"
          f"{'RSS MB':>8}{'peak':>8}{'growth':>8}{'API cpu%':>9}{'atk cpu%':>9}")  # fmt: skip
    ok = True
    for phase in phases:
        ratio = phase.p(95) / base.p(95)
        growth = phase.rss_peak_mb - base.rss_before_mb
        print(f"{phase.name:<36}{len(phase.probe_ms):>7}{phase.probe_errors:>7}"
              f"{phase.p(50):>9.1f}{phase.p(95):>9.1f}{ratio:>9.2f}"
              f"{phase.rss_before_mb:>8.0f}{phase.rss_peak_mb:>8.0f}{growth:>8.0f}"
              f"{phase.api_cpu_pct:>9.0f}{phase.attackers_cpu_pct:>9.0f}")  # fmt: skip
        within = ratio <= 2.0 or not phase.goal
        ok = ok and within and growth <= 100 and phase.probe_errors == 0
    for phase in phases[1:]:
        answers = ", ".join(f"{k} x{v}" for k, v in sorted(phase.attack.items()))
        print(f"  {phase.name}: {answers}")
        if phase.held_s:
            print(f"    slow connections held: max {max(phase.held_s):.1f} s, "
                  f"p50 {percentile(phase.held_s, 50):.1f} s")  # fmt: skip
    print(
        f"load average at the end: {' '.join(f'{x:.1f}' for x in psutil.getloadavg())} "
        f"({psutil.cpu_count()} cores, shared with everything else on this host)"
    )
    print(
        "* not held to the latency goal: the flood's clients use about a core of their "
        "own on this host (atk cpu%), so the probe waits for the CPU, not for the API"
    )
    print(f"goals (p95 <= 2x baseline, RSS growth <= 100 MB, no probe errors): "
          f"{'met' if ok else 'MISSED'}")  # fmt: skip
    return ok
