"""Figure 2, concurrency: POST /v1/chat under 50 and 200 concurrent clients, as a ratio
to this machine's CPU ceiling.

    python -m bench.figures.concurrency [--rows 100000] [--users 1000] [--requests 2000]
        [--clients 50 200] [--time-cap 60] [--api-workers N] [--single 200]
        [--locomo PATH | --no-locomo]

An async httpx load generator on loopback; each level sends `--requests` requests or
runs `--time-cap` seconds, whichever ends first, then stops by itself. A client
refused with 503 + Retry-After (admission control, MEMWELL_API_MAX_INFLIGHT) waits as
told and sends the same request again: refusals are counted apart from errors, which
must be 0. Baseline in the same run: the same load against GET /healthz (no auth, no
I/O), the HTTP + uvicorn + load-generator floor of this machine.

The CPU ceiling, measured in the same run: at one client, `--single` chats give the
CPU time per chat of the API, Postgres and Valkey together (their process trees'
CPU times, psutil); under load, the load generator's own CPU time says how much of the
machine it took. Ceiling = (cores - the load generator's cores) / CPU per chat: the
chats/s the service could serve if it used every cycle left to it as well as it does
one chat at a time. Goal at 50 clients: throughput >= 0.70 of it. The machine's busy
time besides these processes is printed too: on a shared host it is CPU the service
did not get.

Two stores: the synthetic one (`--rows` random vectors over `--users` users) and,
when ../shared/data holds it, LoCoMo dev consolidated through the real pipeline (one
user per conversation) asked its own questions, with the query cache off so every
chat embeds its question.

API processes: `--api-workers`, by default what `memwell api` runs on this machine
(api/server.py default_workers).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness.api_server import ApiProcess, serve_api
from bench.harness.chat_stack import API_ENV, TURNS_PER_SESSION, chat_bodies, chat_stack
from bench.harness.common import percentile, print_table
from bench.harness.cpu import CpuMeter, CpuSample
from bench.harness.headline import ReportRow, add_json_flag, write_json
from bench.harness.host import describe_host, host_block
from bench.harness.loadgen import LoadResult, run_load
from bench.harness.stack import LOCOMO_DEFAULT, BenchStack

GOAL_RATIO = 0.70
GOAL_P95_MS = 250.0

Bodies = list[dict[str, str]]


@dataclass(frozen=True)
class Level:
    """One client count: the chat load, its /healthz floor and the CPU it took."""

    chat: LoadResult
    health: LoadResult
    cpu: CpuSample

    def server_ms_per_chat(self) -> float:
        served = len(self.chat.latencies_ms)
        return self.cpu.total_s / served * 1000 if served else float("nan")

    def other_cores(self) -> float:
        """Cores busy with neither the service nor the load generator (a shared host)."""
        spent = self.cpu.total_s + self.chat.client_cpu_s
        return max(0.0, (self.cpu.host_busy_s - spent) / self.cpu.wall_s)


@dataclass(frozen=True)
class StoreRun:
    """Every measurement on one store."""

    name: str
    single: LoadResult
    single_cpu: CpuSample
    levels: list[Level]

    def cpu_ms_per_chat(self) -> float:
        """At one client: the API, Postgres and Valkey's CPU per chat."""
        return self.single_cpu.total_s / max(1, len(self.single.latencies_ms)) * 1000

    def ceiling(self, level: Level) -> float:
        """Chats/s the cores left by the load generator allow at one-client CPU cost."""
        cores = (os.cpu_count() or 1) - level.chat.client_cores
        return cores / (self.cpu_ms_per_chat() / 1000)

    def ratio(self, level: Level) -> float:
        return level.chat.throughput / self.ceiling(level)

    def left_ratio(self, level: Level) -> float:
        """Throughput over the ceiling on what the other processes of a shared host
        left too (0 when they left nothing)."""
        cores = (os.cpu_count() or 1) - level.chat.client_cores - level.other_cores()
        ceiling = max(0.0, cores) / (self.cpu_ms_per_chat() / 1000)
        return level.chat.throughput / ceiling if ceiling else 0.0


@dataclass(frozen=True)
class ConcurrencyHeadline:
    """Figure 2: one entry per client count, same order in every list; `locomo_*`
    empty when the LoCoMo data was absent or skipped."""

    api_workers: int
    rows: int
    clients: list[int]
    chat_rps: list[float]
    chat_p95_ms: list[float]
    health_rps: list[float]
    health_p95_ms: list[float]
    #: errors of every level and store: anything but 200 and 503 with Retry-After
    errors: int
    host: str = ""
    #: 503 + Retry-After answers per level (each request was sent again)
    chat_refused: list[int] = field(default_factory=list)
    #: API + Postgres + Valkey CPU per chat at one client
    cpu_ms_per_chat: float = 0.0
    loadgen_cores: list[float] = field(default_factory=list)
    ceiling_rps: list[float] = field(default_factory=list)
    ceiling_ratio: list[float] = field(default_factory=list)
    #: cores other processes of a shared host kept busy, and the ratio to what they left
    other_cores: list[float] = field(default_factory=list)
    left_ratio: list[float] = field(default_factory=list)
    locomo_users: int = 0
    locomo_chat_rps: list[float] = field(default_factory=list)
    locomo_chat_p95_ms: list[float] = field(default_factory=list)
    locomo_refused: list[int] = field(default_factory=list)
    locomo_cpu_ms_per_chat: float = 0.0
    locomo_ceiling_ratio: list[float] = field(default_factory=list)

    def report_row(self) -> ReportRow:
        def per_level(rps: list[float], p95: list[float]) -> str:
            return "; ".join(
                f"{c} clients {r:.0f} req/s p95 {p:.0f} ms"
                for c, r, p in zip(self.clients, rps, p95, strict=True)
            )

        def ratios(values: list[float], refused: list[int]) -> str:
            return ", ".join(
                f"{c} clients {r:.2f} ({n} x 503)"
                for c, r, n in zip(self.clients, values, refused, strict=True)
            )

        measured = (
            f"synthetic: {per_level(self.chat_rps, self.chat_p95_ms)}; of CPU ceiling "
            f"{ratios(self.ceiling_ratio, self.chat_refused)}"
        )
        if self.locomo_chat_rps:
            measured += (
                f"<br>LoCoMo ({self.locomo_users} users): "
                f"{per_level(self.locomo_chat_rps, self.locomo_chat_p95_ms)}; of CPU "
                f"ceiling {ratios(self.locomo_ceiling_ratio, self.locomo_refused)}"
            )
        if any(c >= 0.1 for c in self.other_cores):
            shared = ", ".join(f"{c:.1f}" for c in self.other_cores)
            left = ", ".join(f"{r:.2f}" for r in self.left_ratio)
            measured += (
                f"; shared host: other processes took {shared} cores ({left} of what they left)"
            )
        ceilings = ", ".join(f"{c:.0f}" for c in self.ceiling_rps)
        return ReportRow(
            figure=f"2. chat under load, {self.api_workers} API process(es)",
            measured=f"{measured}; errors {self.errors}",
            baseline=f"CPU per chat at 1 client {self.cpu_ms_per_chat:.1f} ms (API + Postgres "
            f"+ Valkey), ceiling {ceilings} req/s; GET /healthz: "
            f"{per_level(self.health_rps, self.health_p95_ms)}; {self.host}",
            goal=f"50 clients >= {GOAL_RATIO:.2f} of the CPU ceiling, p95 <= "
            f"{GOAL_P95_MS:.0f} ms on a fast host; errors 0 (503 + Retry-After allowed)",
        )


def _default_workers() -> int:
    # Imported here: bench asks the door only for its default process count.
    from api.server import default_workers

    return default_workers()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--requests", type=int, default=2000, help="per level")
    p.add_argument("--clients", type=int, nargs="+", default=[50, 200])
    p.add_argument("--time-cap", type=float, default=60.0, help="seconds per level")
    p.add_argument("--api-workers", type=int, default=None, help="default: as `memwell api`")
    p.add_argument("--single", type=int, default=200, help="one-client chats for CPU/chat")
    p.add_argument("--locomo", type=Path, default=LOCOMO_DEFAULT, help="LoCoMo file")
    p.add_argument("--no-locomo", action="store_true", help="the synthetic store only")
    add_json_flag(p)
    return p


def _meter(stack: BenchStack, api: ApiProcess) -> CpuMeter:
    assert stack.postgres_pid is not None and stack.redis_pid is not None
    return CpuMeter({"api": api.pid, "postgres": stack.postgres_pid, "valkey": stack.redis_pid})


def _measure(
    name: str,
    url: str,
    headers: dict[str, str],
    meter: CpuMeter,
    bodies: Callable[[int, int], Bodies],
    a: argparse.Namespace,
) -> StoreRun:
    """Warm up, measure one client's CPU per chat, then each client level.
    `bodies(n, start)`: n chat requests no earlier call returned."""

    def chat(clients: int, count: int, start: int) -> tuple[LoadResult, CpuSample]:
        requests = bodies(count, start)
        before = meter.sample()
        result = run_load(url, "/v1/chat", clients=clients, count=count,
                          time_cap_s=a.time_cap, bodies=requests, headers=headers)  # fmt: skip
        return result, meter.sample().minus(before)

    print(f"{name}: warm-up, then {a.single} chats at one client", file=sys.stderr)
    # Warm every API process (each loads its own ONNX session) and the connections.
    chat(10, 50, 10**6)
    single, single_cpu = chat(1, a.single, 2 * 10**6)
    levels = []
    for level, clients in enumerate(a.clients, 1):
        health = run_load(url, "/healthz", clients=clients, count=a.requests, time_cap_s=a.time_cap)
        load, cpu = chat(clients, a.requests, (level + 2) * 10**6)
        levels.append(Level(chat=load, health=health, cpu=cpu))
    return StoreRun(name, single, single_cpu, levels)


def _synthetic(a: argparse.Namespace) -> StoreRun:
    with chat_stack(rows=a.rows, users=a.users, api_workers=a.api_workers) as chat:
        return _measure(
            f"synthetic, {a.rows:,} memories over {a.users:,} users",
            chat.api.url,
            chat.headers,
            _meter(chat.stack, chat.api),
            lambda n, start: chat_bodies(n, users=a.users, start=start),
            a,
        )


def _locomo_bodies(questions: Sequence[tuple[str, str]]) -> Callable[[int, int], Bodies]:
    """Each LoCoMo question asked by its conversation's user, in sessions of
    TURNS_PER_SESSION messages, new sessions on every call."""

    def make(n: int, start: int) -> Bodies:
        sessions = max(1, -(-n // TURNS_PER_SESSION))
        out = []
        for k in range(n):
            user, question = questions[(start + k) % len(questions)]
            out.append(
                {
                    "user_id": user,
                    "session_id": f"bench-{start + k % sessions}",
                    "message": question,
                }
            )
        return out

    return make


def _locomo(a: argparse.Namespace) -> tuple[StoreRun, int]:
    """The LoCoMo store's run, and its number of users."""
    # Imported here: the LoCoMo harness is only needed when its data is there.
    from bench.harness.locomo_store import locomo_store

    with locomo_store(a.locomo, scopes=["read", "write"]) as store:
        # Every question, interleaved across users: the i-th of each user, then the next.
        ranked = [
            (i, n, (c.sample_id, q.text))
            for n, c in enumerate(store.conversations)
            for i, q in enumerate(c.questions)
        ]
        questions = [pair for _, _, pair in sorted(ranked)]
        env = {**API_ENV, "MEMWELL_QUERY_CACHE_SIZE": "0"}
        with serve_api(store.stack, workers=a.api_workers, env=env) as api:
            headers = {"Authorization": f"Bearer {store.api_key}"}
            run = _measure(
                f"LoCoMo dev, {sum(store.memories.values()):,} memories over "
                f"{len(store.memories)} users",
                api.url,
                headers,
                _meter(store.stack, api),
                _locomo_bodies(questions),
                a,
            )
        return run, len(store.memories)


def _print_run(run: StoreRun) -> None:
    print(f"\n{run.name}")
    rows: list[list[object]] = []
    s = run.single
    rows.append(
        [
            "POST /v1/chat",
            1,
            len(s.latencies_ms),
            s.refused,
            f"{s.throughput:.0f}",
            f"{s.p(50):.1f}",
            f"{s.p(95):.1f}",
            "",
            f"{s.elapsed_s:.1f}",
            _errors(s),
        ]
    )
    for lv in run.levels:
        for what, r in (("GET /healthz (floor)", lv.health), ("POST /v1/chat", lv.chat)):
            p95_e2e = f"{percentile(r.end_to_end_ms, 95):.1f}" if r.refused else ""
            rows.append(
                [
                    what,
                    r.clients,
                    len(r.latencies_ms),
                    r.refused,
                    f"{r.throughput:.0f}",
                    f"{r.p(50):.1f}",
                    f"{r.p(95):.1f}",
                    p95_e2e,
                    f"{r.elapsed_s:.1f}",
                    _errors(r),
                ]
            )
    print_table(
        [
            "request",
            "clients",
            "ok",
            "503",
            "req/s",
            "p50 ms",
            "p95 ms",
            "p95 incl. retries",
            "s",
            "errors",
        ],
        rows,
    )
    by = run.single_cpu.by_name
    served = max(1, len(run.single.latencies_ms))
    split = ", ".join(f"{n} {cpu / served * 1000:.2f}" for n, cpu in by.items())
    print(f"\nCPU per chat at one client: {run.cpu_ms_per_chat():.2f} ms ({split} ms)")
    cpu_rows = [
        [
            lv.chat.clients,
            f"{lv.chat.client_cores:.2f}",
            f"{lv.other_cores():.2f}",
            f"{lv.server_ms_per_chat():.2f}",
            f"{run.ceiling(lv):.0f}",
            f"{lv.chat.throughput:.0f}",
            f"{run.ratio(lv):.2f}",
            f"{run.left_ratio(lv):.2f}",
        ]
        for lv in run.levels
    ]
    print_table(
        [
            "clients",
            "load generator cores",
            "other processes cores",
            "CPU ms/chat under load",
            "ceiling req/s",
            "req/s",
            "of ceiling",
            "of what others left",
        ],
        cpu_rows,
    )


def _errors(r: LoadResult) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(r.errors.items())) or "0"


def headline(argv: list[str] | None = None) -> ConcurrencyHeadline:
    """Run figure 2, print its tables, return its headline numbers."""
    a = _parser().parse_args(argv)
    if a.api_workers is None:
        a.api_workers = _default_workers()
    host = describe_host()
    synthetic = _synthetic(a)
    locomo, locomo_users = None, 0
    if not a.no_locomo and a.locomo.exists():
        locomo, locomo_users = _locomo(a)
    elif not a.no_locomo:
        print(
            f"LoCoMo data not found at {a.locomo}: the real-data variant is skipped",
            file=sys.stderr,
        )

    print(f"\n{host_block()}")
    print(
        f"concurrency, {a.api_workers} API process(es) on {os.cpu_count()} cores, async "
        "httpx load generator on loopback"
    )
    runs = [r for r in (synthetic, locomo) if r is not None]
    for run in runs:
        _print_run(run)
    errors = sum(lv.chat.error_count + lv.health.error_count for r in runs for lv in r.levels)
    errors += sum(r.single.error_count for r in runs)
    print(f"\nerrors: {errors} (must be 0; 503 with Retry-After is not an error)")
    lv = synthetic.levels
    return ConcurrencyHeadline(
        api_workers=a.api_workers,
        rows=a.rows,
        clients=list(a.clients),
        chat_rps=[x.chat.throughput for x in lv],
        chat_p95_ms=[x.chat.p(95) for x in lv],
        health_rps=[x.health.throughput for x in lv],
        health_p95_ms=[x.health.p(95) for x in lv],
        errors=errors,
        host=host,
        chat_refused=[x.chat.refused for x in lv],
        cpu_ms_per_chat=synthetic.cpu_ms_per_chat(),
        loadgen_cores=[x.chat.client_cores for x in lv],
        ceiling_rps=[synthetic.ceiling(x) for x in lv],
        ceiling_ratio=[synthetic.ratio(x) for x in lv],
        other_cores=[x.other_cores() for x in lv],
        left_ratio=[synthetic.left_ratio(x) for x in lv],
        locomo_users=locomo_users,
        locomo_chat_rps=[x.chat.throughput for x in locomo.levels] if locomo else [],
        locomo_chat_p95_ms=[x.chat.p(95) for x in locomo.levels] if locomo else [],
        locomo_refused=[x.chat.refused for x in locomo.levels] if locomo else [],
        locomo_cpu_ms_per_chat=locomo.cpu_ms_per_chat() if locomo else 0.0,
        locomo_ceiling_ratio=[locomo.ratio(x) for x in locomo.levels] if locomo else [],
    )


def main() -> int:
    result = headline()
    write_json(result, _parser().parse_args().json)
    return 1 if result.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
