"""Figure 2, concurrency: POST /v1/chat under 50 and 200 concurrent clients.

    python -m bench.figures.concurrency [--rows 100000] [--users 1000] [--requests 2000]
                                      [--clients 50 200] [--time-cap 60] [--api-workers 1]

An async httpx load generator on loopback; each level sends `--requests` requests or
runs `--time-cap` seconds, whichever ends first, then stops by itself. Baseline in the
same run: the same load against GET /healthz (no auth, no I/O), the HTTP + uvicorn +
load-generator floor of this machine. Errors must be 0 and are printed by kind.

API worker processes: 1 by default. This machine has 2 cores, and the load generator
(one Python process at 100% of a core under this load) and Postgres share them with the
API; a second uvicorn process would compete for the same cores rather than add any.
On a bigger machine, run one API process per core left after the load generator.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from bench.harness.chat_stack import chat_bodies, chat_stack
from bench.harness.common import print_table
from bench.harness.headline import ReportRow, add_json_flag, write_json
from bench.harness.loadgen import LoadResult, run_load


@dataclass(frozen=True)
class ConcurrencyHeadline:
    """Figure 2: one entry per client count, same order in every list."""

    api_workers: int
    rows: int
    clients: list[int]
    chat_rps: list[float]
    chat_p95_ms: list[float]
    health_rps: list[float]
    health_p95_ms: list[float]
    errors: int

    def report_row(self) -> ReportRow:
        def per_level(rps: list[float], p95: list[float]) -> str:
            return "; ".join(
                f"{c} clients {r:.0f} req/s p95 {p:.0f} ms"
                for c, r, p in zip(self.clients, rps, p95, strict=True)
            )

        return ReportRow(
            figure=f"2. chat under load, {self.api_workers} API process(es)",
            measured=f"{per_level(self.chat_rps, self.chat_p95_ms)}; errors {self.errors}",
            baseline=f"GET /healthz: {per_level(self.health_rps, self.health_p95_ms)}",
            goal="errors 0",
        )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--requests", type=int, default=2000, help="per level")
    p.add_argument("--clients", type=int, nargs="+", default=[50, 200])
    p.add_argument("--time-cap", type=float, default=60.0, help="seconds per level")
    p.add_argument("--api-workers", type=int, default=1)
    add_json_flag(p)
    return p


def _row(what: str, r: LoadResult) -> list[object]:
    errors = ", ".join(f"{k}: {v}" for k, v in sorted(r.errors.items())) or "0"
    return [what, r.clients, len(r.latencies_ms), f"{r.throughput:.0f}", f"{r.p(50):.1f}",
            f"{r.p(95):.1f}", f"{r.elapsed_s:.1f}", errors]  # fmt: skip


def headline(argv: list[str] | None = None) -> ConcurrencyHeadline:
    """Run figure 2, print its table, return its headline numbers."""
    a = _parser().parse_args(argv)
    runs: list[tuple[LoadResult, LoadResult]] = []
    with chat_stack(rows=a.rows, users=a.users, api_workers=a.api_workers) as chat:
        # Warm every API process (each loads its own ONNX session) and the connections.
        warm = chat_bodies(50, users=a.users, start=10**6)
        run_load(chat.api.url, "/v1/chat", clients=10, count=50, time_cap_s=a.time_cap,
                 bodies=warm, headers=chat.headers)  # fmt: skip
        for level, clients in enumerate(a.clients):
            health = run_load(chat.api.url, "/healthz", clients=clients, count=a.requests,
                              time_cap_s=a.time_cap)  # fmt: skip
            # New sessions and messages per level: no query-cache hits, fresh buffers.
            bodies = chat_bodies(a.requests, users=a.users, start=(level + 1) * a.requests)
            load = run_load(chat.api.url, "/v1/chat", clients=clients, count=a.requests,
                            time_cap_s=a.time_cap, bodies=bodies, headers=chat.headers)  # fmt: skip
            runs.append((load, health))
    print(
        f"\nconcurrency, {a.rows:,} memories over {a.users:,} users, {a.api_workers} API "
        f"process(es) on {os.cpu_count()} cores, async httpx load generator on loopback"
    )
    rows = []
    for load, health in runs:
        rows += [_row("GET /healthz (floor)", health), _row("POST /v1/chat", load)]
    print_table(["request", "clients", "ok", "req/s", "p50 ms", "p95 ms", "s", "errors"], rows)
    errors = sum(load.error_count + health.error_count for load, health in runs)
    print(f"errors: {errors} (must be 0)")
    return ConcurrencyHeadline(
        api_workers=a.api_workers,
        rows=a.rows,
        clients=list(a.clients),
        chat_rps=[load.throughput for load, _ in runs],
        chat_p95_ms=[load.p(95) for load, _ in runs],
        health_rps=[health.throughput for _, health in runs],
        health_p95_ms=[health.p(95) for _, health in runs],
        errors=errors,
    )


def main() -> int:
    result = headline()
    write_json(result, _parser().parse_args().json)
    return 1 if result.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
