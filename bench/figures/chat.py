"""Figure 1, chat-path overhead: p50/p95/p99 of POST /v1/chat over real HTTP, by stage.

    python -m bench.figures.chat [--rows 1000000] [--users 1000] [--requests 500]

The API (uvicorn, one process) serves a store of `--rows` memories over `--users`
users; the model is the instant local recall responder (no model endpoint set). One
client sends the requests one at a time (latency, not load), each a new message of one
of many sessions. The response's `timings_ms` gives the server's stages; the client
adds what HTTP, auth and JSON cost. Beside it, in the same run, the floors: one Redis
round trip, one local query embedding at batch 1, one bare per-user exact top-10.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx
import psycopg
import redis
from pgvector.psycopg import register_vector

from bench.figures.retrieval import bare_exact
from bench.harness.chat_stack import ChatStack, chat_bodies, chat_stack, user_name
from bench.harness.common import percentile, print_table
from bench.harness.headline import ReportRow, add_json_flag, write_json
from memwell.core.settings import Settings
from memwell.db.driver import libpq_url
from memwell.embeddings import build_embedder

STAGES = (
    "buffer",
    "embed",
    "retrieve",
    "assemble",
    "model",
    "buffer_append",
    "enqueue",
    "total",
)
GOAL_MS = 10.0
QUANTILES = (50, 95, 99)
NO_MODEL = "total excluding model"
CLIENT = "client-observed (+ HTTP, auth, JSON)"
FLOOR_SUM = "floor: sum"


@dataclass(frozen=True)
class ChatHeadline:
    """Figure 1: the chat path without the model, and the floors it is held against."""

    rows: int
    users: int
    requests: int
    p50_ms: float  # server total minus the model stage
    p95_ms: float
    p99_ms: float
    client_p95_ms: float
    floor_p50_ms: float
    floor_p95_ms: float

    def report_row(self) -> ReportRow:
        return ReportRow(
            figure=f"1. chat path excl. model, {self.rows:,} memories / {self.users:,} users",
            measured=f"p50 {self.p50_ms:.1f} / p95 {self.p95_ms:.1f} / p99 {self.p99_ms:.1f} ms "
            f"(client-observed p95 {self.client_p95_ms:.1f} ms)",
            baseline=f"sum of floors p50 {self.floor_p50_ms:.1f} / p95 {self.floor_p95_ms:.1f} ms",
            goal=f"p95 <= {GOAL_MS:g} ms excluding model",
        )


@dataclass(frozen=True)
class Sample:
    client_ms: float
    stages_ms: dict[str, float]


def send_sequential(chat: ChatStack, bodies: Sequence[dict[str, str]], label: str) -> list[Sample]:
    """POST each body in turn on one keep-alive connection; any non-200 stops the run."""
    samples = []
    with httpx.Client(base_url=chat.api.url, headers=chat.headers, timeout=30) as client:
        for n, body in enumerate(bodies, 1):
            t0 = time.perf_counter()
            response = client.post("/v1/chat", json=body)
            client_ms = (time.perf_counter() - t0) * 1000
            if response.status_code != 200:
                raise RuntimeError(f"POST /v1/chat: {response.status_code} {response.text[:300]}")
            samples.append(Sample(client_ms, response.json()["timings_ms"]))
            if n % 25 == 0 or n == len(bodies):
                print(f"\r  {label}: {n}/{len(bodies)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return samples


def _time_ms(fn: Callable[[int], object], n: int) -> list[float]:
    fn(0)  # warm: connection, plan, first ONNX run
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def measure_floors(chat: ChatStack, messages: Sequence[str]) -> dict[str, list[float]]:
    """The three floors, measured from this process against the same services."""
    print("  measuring the floors", file=sys.stderr)
    assert chat.stack.redis_url is not None
    client = redis.Redis.from_url(chat.stack.redis_url)

    def redis_rtt(_: int) -> object:
        pipe = client.pipeline(transaction=False)
        pipe.ping()
        pipe.get("bench:floor")
        return pipe.execute()

    # Built exactly as the API builds its own (api/state.py), minus its cache and meter.
    settings = Settings(embedding_provider="local")
    embedder = build_embedder(settings, for_queries=True)
    vectors = [embedder.embed([m])[0] for m in messages]
    n = len(messages)
    with psycopg.connect(libpq_url(chat.stack.database_url), autocommit=True) as conn:
        register_vector(conn)
        tops = [bare_exact(conn, user_name((i * 7919) % chat.users)) for i in range(n)]
        floors = {
            "Redis round trip (pipeline PING+GET)": _time_ms(redis_rtt, n),
            f"query embedding, batch 1 ({settings.local_query_precision})": _time_ms(
                lambda i: embedder.embed([messages[i]]), n
            ),
            "bare per-user exact top-10": _time_ms(lambda i: tops[i](vectors[i]), n),
        }
    client.close()
    return floors


def _quantiles(values: Sequence[float]) -> list[float]:
    return [percentile(values, q) for q in QUANTILES]


def summarize(samples: Sequence[Sample], floors: dict[str, list[float]]) -> dict[str, list[float]]:
    """p50/p95/p99 per table row: the stages, the totals, then the floors and their sum."""
    out = {stage: _quantiles([s.stages_ms.get(stage, 0.0) for s in samples]) for stage in STAGES}
    out[NO_MODEL] = _quantiles([s.stages_ms["total"] - s.stages_ms["model"] for s in samples])
    out[CLIENT] = _quantiles([s.client_ms for s in samples])
    for name, values in floors.items():
        out[f"floor: {name}"] = _quantiles(values)
    per_floor = [_quantiles(v) for v in floors.values()]
    out[FLOOR_SUM] = [sum(q) for q in zip(*per_floor, strict=True)]
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--requests", type=int, default=500)
    p.add_argument("--warmup", type=int, default=20, help="requests sent first, not counted")
    add_json_flag(p)
    return p


def headline(argv: list[str] | None = None) -> ChatHeadline:
    """Run figure 1, print its table, return its headline numbers."""
    a = _parser().parse_args(argv)
    bodies = chat_bodies(a.warmup + a.requests, users=a.users)
    with chat_stack(rows=a.rows, users=a.users) as chat:
        send_sequential(chat, bodies[: a.warmup], "warm-up")
        samples = send_sequential(chat, bodies[a.warmup :], "POST /v1/chat")
        floors = measure_floors(chat, [b["message"] for b in bodies[a.warmup :]])
    rows = summarize(samples, floors)
    print(f"\nchat path, {a.rows:,} memories over {a.users:,} users, 384 dims, "
          f"{a.requests} sequential requests, recall responder as the model (ms)")  # fmt: skip
    print_table(
        ["stage", "p50", "p95", "p99"], [[k, *(f"{v:.2f}" for v in qs)] for k, qs in rows.items()]
    )
    no_model, floor = rows[NO_MODEL], rows[FLOOR_SUM]
    met = "met" if no_model[1] <= GOAL_MS else "NOT met"
    print(f"goal: p95 <= {GOAL_MS:g} ms excluding model -> {met} (p95 {no_model[1]:.2f} ms)")
    return ChatHeadline(
        rows=a.rows, users=a.users, requests=a.requests,
        p50_ms=no_model[0], p95_ms=no_model[1], p99_ms=no_model[2],
        client_p95_ms=rows[CLIENT][1], floor_p50_ms=floor[0], floor_p95_ms=floor[1],
    )  # fmt: skip


def main() -> int:
    write_json(headline(), _parser().parse_args().json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
