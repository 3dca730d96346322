"""Figure 1, chat-path overhead: p50/p95/p99 of POST /v1/chat over real HTTP, by stage.

    python -m bench.figures.chat [--rows 1000000] [--users 1000] [--requests 500]
    python -m bench.figures.chat --locomo ../shared/data/locomo/locomo-dev.json

The API (uvicorn, one process) serves a store of `--rows` memories over `--users`
users; the model is the instant local recall responder (no model endpoint set). One
client sends the requests one at a time (latency, not load), each a new message of one
of many sessions. The response's `timings_ms` gives the server's stages; the client
adds what HTTP, auth and JSON cost. Beside it, in the same run, the floors: one Redis
round trip, one local query embedding at batch 1, one bare per-user exact top-10; the
goal is a ratio to their sum, so it means the same on a slow host and a fast one.

`--locomo FILE`: the LoCoMo conversations consolidated as users (tenant `locomo`) beside
the synthetic store, and their questions as the messages, asked as their users; the
floors then embed those questions and scan those users' rows.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
import redis
from pgvector.psycopg import register_vector

from bench.figures.chat_steps import PathSteps
from bench.figures.retrieval import TENANT, bare_exact
from bench.harness.api_server import serve_api
from bench.harness.chat_stack import API_ENV, ChatStack, chat_bodies, chat_stack
from bench.harness.common import percentile, print_table
from bench.harness.headline import ReportRow, add_json_flag, figure_main
from bench.harness.host import describe_host, describe_onnx, tree_cpu_s
from bench.harness.progress import progress
from bench.harness.real_store import locomo_asks, locomo_beside_synthetic
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
#: total excluding the model, p95, at most this many times the floors' p95 sum
GOAL_RATIO = 1.25
QUANTILES = (50, 95, 99)
NO_MODEL = "total excluding model"
CLIENT = "client-observed (+ HTTP, auth, JSON)"
FLOOR_SUM = "floor: sum"
APART = "floor: sum, each floor in a loop of its own"
STEPS_SUM = "steps: sum (buffer read, embedding, search, append, enqueue)"


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
    #: "synthetic", or the LoCoMo file asked (its users and questions)
    data: str = "synthetic"
    locomo_users: int = 0
    locomo_memories: int = 0
    host: str = ""
    #: the floors' p95 sum when each floor is timed in a loop of its own (hot caches)
    floor_apart_p95_ms: float = 0.0
    #: CPU ms per request: API + Postgres + Valkey; the floors' (all sides) per message
    cpu_ms: float = 0.0
    floor_cpu_ms: float = 0.0
    #: the p95 sum of the path's own steps, each done alone (chat_steps.py)
    steps_p95_ms: float = 0.0

    @property
    def ratio_p95(self) -> float:
        return self.p95_ms / self.floor_p95_ms

    def report_row(self) -> ReportRow:
        where = f"{self.rows:,} memories / {self.users:,} users"
        if self.data != "synthetic":
            where = (f"LoCoMo questions to {self.locomo_users} LoCoMo users "
                     f"({self.locomo_memories:,} memories) beside {where}")  # fmt: skip
        return ReportRow(
            figure=f"1. chat path excl. model, {where}",
            measured=f"p50 {self.p50_ms:.1f} / p95 {self.p95_ms:.1f} / p99 {self.p99_ms:.1f} ms "
            f"= **{self.ratio_p95:.2f}x** the floors at p95"
            + (
                f" ({self.p95_ms / self.floor_apart_p95_ms:.2f}x floors timed apart)"
                if self.floor_apart_p95_ms
                else ""
            )
            + (
                f"; {self.p95_ms / self.steps_p95_ms:.2f}x the sum of its own steps"
                if self.steps_p95_ms
                else ""
            )
            + f"; client-observed p95 {self.client_p95_ms:.1f} ms"
            + (
                f"; CPU {self.cpu_ms:.1f} ms per request, {self.cpu_ms / self.floor_cpu_ms:.2f}x "
                f"the floors' {self.floor_cpu_ms:.1f}"
                if self.floor_cpu_ms
                else ""
            ),
            baseline=f"Redis round trip + query embedding (batch 1) + bare top-10: p50 "
            f"{self.floor_p50_ms:.1f} / p95 {self.floor_p95_ms:.1f} ms",
            goal=f"p95 <= {GOAL_RATIO:g}x the floors",
        )


@dataclass(frozen=True)
class Sample:
    client_ms: float
    stages_ms: dict[str, float]


def send_sequential(
    chat: ChatStack,
    bodies: Sequence[dict[str, str]],
    label: str,
    *,
    after: Callable[[int], object] | None = None,
) -> list[Sample]:
    """POST each body in turn on one keep-alive connection; any non-200 stops the run.
    `after(i)` runs once request i is answered, outside its timing (the floors)."""
    samples = []
    with (
        httpx.Client(base_url=chat.api.url, headers=chat.headers, timeout=30) as client,
        progress(label, len(bodies)) as bar,
    ):
        for n, body in enumerate(bodies, 1):
            t0 = time.perf_counter()
            response = client.post("/v1/chat", json=body)
            client_ms = (time.perf_counter() - t0) * 1000
            if response.status_code != 200:
                raise RuntimeError(f"POST /v1/chat: {response.status_code} {response.text[:300]}")
            samples.append(Sample(client_ms, response.json()["timings_ms"]))
            if after is not None:
                after(n - 1)
            if n % 25 == 0 or n == len(bodies):
                bar.update(n)
    return samples


def _time_each(
    i: int,
    names: Sequence[str],
    steps: Sequence[Callable[[int], object]],
    into: dict[str, list[float]],
) -> None:
    """Run each step for message i, one after another, appending its ms under its name."""
    for name, step in zip(names, steps, strict=True):
        t0 = time.perf_counter()
        step(i)
        into[name].append((time.perf_counter() - t0) * 1000)


def _time_ms(fn: Callable[[int], object], n: int) -> list[float]:
    fn(0)  # warm: connection, plan, first ONNX run
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t0) * 1000)
    return out


#: interleaved floors, the same timed each in a loop of its own, CPU ms per message, and
#: the path's own steps (chat_steps.py)
Floors = tuple[
    dict[str, list[float]], dict[str, list[float]], dict[str, float], dict[str, list[float]]
]


def server_pids(chat: ChatStack) -> dict[str, int]:
    """The processes whose CPU a request costs: the API (uvicorn and its children),
    Postgres (the postmaster: its backends are its children) and Valkey."""
    assert chat.stack.redis_url is not None
    with psycopg.connect(libpq_url(chat.stack.database_url)) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        postmaster = psutil.Process(int(row[0])).ppid()  # while the backend lives
    client = redis.Redis.from_url(chat.stack.redis_url)
    valkey = int(client.info("server")["process_id"])
    client.close()
    return {"API": chat.api.pid, "Postgres": postmaster, "Valkey": valkey}


def cpu_sample(pids: dict[str, int]) -> dict[str, float]:
    return {name: tree_cpu_s([pid]) for name, pid in pids.items()}


class FloorRun:
    """The three floors, measured from this process against the same services, one
    message at a time between the chat requests: `owners[i]` is the (tenant, user)
    whose rows message i searched.

    For each message a Redis round trip, its embedding, its user's top-10, as a chat
    does the work: each floor starts with caches the other two just used, as the chat
    path's stages do. Run right after the request that sent the same message, so the
    floors and the requests share the host's load, minute by minute, and their ratio
    means something on a busy host (timed in a block after every request, the floors
    once met a quieter or a busier minute than the requests did). Also the same floors
    each timed in a loop of its own (model and code stay hot: the floors this figure
    used before, printed beside), and the CPU of the servers and of this process while
    the floors ran, which `chat_cpu` takes out of the requests' share. After the floors,
    the path's own steps (chat_steps.py), whose servers' CPU is taken out too."""

    def __init__(
        self,
        chat: ChatStack,
        bodies: Sequence[dict[str, str]],
        owners: Sequence[tuple[str, str]],
        servers: dict[str, int],
        conn: psycopg.Connection[Any],
    ) -> None:
        assert chat.stack.redis_url is not None
        messages = [b["message"] for b in bodies]
        self._client = redis.Redis.from_url(chat.stack.redis_url)
        # Built exactly as the API builds its own (api/state.py), minus its cache and meter.
        settings = Settings(embedding_provider="local")
        embedder = build_embedder(settings, for_queries=True)
        vectors = [embedder.embed([m])[0] for m in messages]
        tops = [bare_exact(conn, user, tenant=tenant) for tenant, user in owners]
        self.names = (
            "Redis round trip (pipeline PING+GET)",
            f"query embedding, batch 1 ({settings.local_query_precision})",
            "bare per-user exact top-10",
        )
        self.steps: list[Callable[[int], object]] = [
            self._redis_rtt,
            lambda i: embedder.embed([messages[i]]),
            lambda i: tops[i](vectors[i]),
        ]
        self.path = PathSteps(
            database_url=chat.stack.database_url, redis_url=chat.stack.redis_url,
            settings=settings, bodies=bodies, owners=owners, vectors=vectors,
        )  # fmt: skip
        for step in (*self.steps, *self.path.steps):
            step(0)  # warm: connection, plan, first ONNX run
        self.floors: dict[str, list[float]] = {name: [] for name in self.names}
        self.path_ms: dict[str, list[float]] = {name: [] for name in self.path.names}
        self.servers = servers
        #: CPU seconds while the floors ran: the servers', and this process's
        self.server_cpu_s = dict.fromkeys(servers, 0.0)
        self.own_cpu_s = 0.0
        #: the servers' CPU seconds while the path's steps ran
        self.path_cpu_s = dict.fromkeys(servers, 0.0)

    def _redis_rtt(self, _: int) -> object:
        pipe = self._client.pipeline(transaction=False)
        pipe.ping()
        pipe.get("bench:floor")
        return pipe.execute()

    def step(self, i: int) -> None:
        """The floors of message i, each timed, then the path's steps."""
        before, own = cpu_sample(self.servers), time.process_time()
        _time_each(i, self.names, self.steps, self.floors)
        self.own_cpu_s += time.process_time() - own
        between = cpu_sample(self.servers)
        for name, cpu in between.items():
            self.server_cpu_s[name] += cpu - before[name]
        _time_each(i, self.path.names, self.path.steps, self.path_ms)
        for name, cpu in cpu_sample(self.servers).items():
            self.path_cpu_s[name] += cpu - between[name]

    def chat_cpu(self, before: dict[str, float], n: int) -> dict[str, float]:
        """CPU ms per request of the servers since `before`, the floors' and the steps'
        share taken out."""
        after = cpu_sample(self.servers)
        return {
            k: (after[k] - before[k] - self.server_cpu_s[k] - self.path_cpu_s[k]) * 1000 / n
            for k in after
        }

    def result(self) -> Floors:
        """The floors per message, the same each in a loop of its own, and the floors'
        CPU ms per message: this process (the embedding, the clients), Postgres, Valkey."""
        n = len(self.floors[self.names[0]])
        cpu = {"this process": self.own_cpu_s * 1000 / n}
        cpu |= {k: v * 1000 / n for k, v in self.server_cpu_s.items() if k != "API"}
        apart = {name: _time_ms(step, n) for name, step in zip(self.names, self.steps, strict=True)}
        self._client.close()
        self.path.close()
        return self.floors, apart, cpu, self.path_ms


def measure(
    chat: ChatStack,
    bodies: Sequence[dict[str, str]],
    owners: Sequence[tuple[str, str]],
    label: str,
) -> tuple[list[Sample], Floors, dict[str, float]]:
    """The requests, each followed by its floors; the server CPU ms per request."""
    print("  preparing the floors", file=sys.stderr)
    pids = server_pids(chat)
    with psycopg.connect(libpq_url(chat.stack.database_url), autocommit=True) as conn:
        register_vector(conn)
        run = FloorRun(chat, bodies, owners, pids, conn)
        before = cpu_sample(pids)
        samples = send_sequential(chat, bodies, label, after=run.step)
        cpu = run.chat_cpu(before, len(bodies))
        floors = run.result()
    return samples, floors, cpu


def _quantiles(values: Sequence[float]) -> list[float]:
    return [percentile(values, q) for q in QUANTILES]


def summarize(
    samples: Sequence[Sample],
    floors: dict[str, list[float]],
    apart: dict[str, list[float]],
    path: dict[str, list[float]],
) -> dict[str, list[float]]:
    """p50/p95/p99 per table row: the stages, the totals, then the floors and their sum
    (the goal's), the floors' sum when each is timed in a loop of its own, and the path's
    own steps (the floors' embedding among them) and their sum."""
    out = {stage: _quantiles([s.stages_ms.get(stage, 0.0) for s in samples]) for stage in STAGES}
    out[NO_MODEL] = _quantiles([s.stages_ms["total"] - s.stages_ms["model"] for s in samples])
    out[CLIENT] = _quantiles([s.client_ms for s in samples])
    for name, values in floors.items():
        out[f"floor: {name}"] = _quantiles(values)
    per_floor = [_quantiles(v) for v in floors.values()]
    out[FLOOR_SUM] = [sum(q) for q in zip(*per_floor, strict=True)]
    out[APART] = [sum(q) for q in zip(*(_quantiles(v) for v in apart.values()), strict=True)]
    for name, values in path.items():
        out[name] = _quantiles(values)
    embedding = next(v for k, v in floors.items() if k.startswith("query embedding"))
    per_step = [_quantiles(embedding), *(_quantiles(v) for v in path.values())]
    out[STEPS_SUM] = [sum(q) for q in zip(*per_step, strict=True)]
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--requests", type=int, default=500)
    p.add_argument("--warmup", type=int, default=20, help="requests sent first, not counted")
    p.add_argument(
        "--locomo", type=Path, default=None, metavar="FILE",
        help="LoCoMo users beside the synthetic store, asked their questions",
    )  # fmt: skip
    add_json_flag(p)
    return p


def _synthetic(a: argparse.Namespace) -> tuple[list[Sample], Floors, dict[str, float], str]:
    bodies = chat_bodies(a.warmup + a.requests, users=a.users)
    timed = bodies[a.warmup :]
    owners = [(TENANT, b["user_id"]) for b in timed]
    with chat_stack(rows=a.rows, users=a.users) as chat:
        send_sequential(chat, bodies[: a.warmup], "warm-up")
        samples, floors, cpu = measure(chat, timed, owners, "POST /v1/chat")
    return samples, floors, cpu, f"{a.rows:,} memories over {a.users:,} users"


def _locomo(
    a: argparse.Namespace,
) -> tuple[list[Sample], Floors, dict[str, float], str, int, int]:
    with locomo_beside_synthetic(a.locomo, rows=a.rows, users=a.users) as store:
        asks = locomo_asks(store, a.warmup + a.requests)
        # Sessions of 10 questions per user, so buffers grow as in figure 1.
        seen: dict[str, int] = {}
        bodies = []
        for ask in asks:
            n = seen[ask.user_id] = seen.get(ask.user_id, -1) + 1
            session = f"{ask.user_id}-bench-s{n // 10}"
            bodies.append({"user_id": ask.user_id, "session_id": session, "message": ask.question})
        timed = bodies[a.warmup :]
        headers = {"Authorization": f"Bearer {store.api_key}"}
        owners = [("locomo", b["user_id"]) for b in timed]
        with serve_api(store.stack, env=API_ENV) as api:
            chat = ChatStack(store.stack, api, headers, rows=a.rows, users=a.users)
            send_sequential(chat, bodies[: a.warmup], "warm-up")
            samples, floors, cpu = measure(chat, timed, owners, "POST /v1/chat (LoCoMo)")
        memories = sum(store.memories.values())
        where = (
            f"LoCoMo questions to {len(store.memories)} LoCoMo users ({memories:,} memories) "
            f"beside {a.rows:,} synthetic memories over {a.users:,} users"
        )
        return samples, floors, cpu, where, len(store.memories), memories


def headline(argv: list[str] | None = None) -> ChatHeadline | None:
    """Run figure 1, print its table, return its headline numbers (None: no data)."""
    a = _parser().parse_args(argv)
    print(f"host: {describe_host()}\nonnx: {describe_onnx()}")
    locomo_users = locomo_memories = 0
    if a.locomo is not None:
        if not a.locomo.exists():
            print(f"skipped: LoCoMo data not found at {a.locomo}")
            return None
        samples, floors, cpu, where, locomo_users, locomo_memories = _locomo(a)
    else:
        samples, floors, cpu, where = _synthetic(a)
    rows = summarize(samples, floors[0], floors[1], floors[3])
    print(f"\nchat path, {where}, 384 dims, {a.requests} sequential requests, recall "
          f"responder as the model (ms)")  # fmt: skip
    print_table(
        ["stage", "p50", "p95", "p99"], [[k, *(f"{v:.2f}" for v in qs)] for k, qs in rows.items()]
    )
    no_model, floor = rows[NO_MODEL], rows[FLOOR_SUM]
    ratios = zip(QUANTILES, no_model, floor, strict=True)
    print("ratio to the floors' sum: " + " / ".join(f"p{q} {m / f:.2f}x" for q, m, f in ratios))
    apart = rows[APART]
    print(f"ratio to the floors timed each in a loop of its own: p95 {no_model[1] / apart[1]:.2f}x")
    steps = rows[STEPS_SUM]
    print("ratio to the sum of the path's own steps, each done alone (what the path's "
          "handling adds): " + " / ".join(
              f"p{q} {m / f:.2f}x" for q, m, f in zip(QUANTILES, no_model, steps, strict=True)
          ))  # fmt: skip
    ratio = no_model[1] / floor[1]
    met = "met" if ratio <= GOAL_RATIO else "NOT met"
    print("CPU ms per request (moves less than the latencies on a busy host):")
    print("  chat, server side:  " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
          + f"; sum {sum(cpu.values()):.2f}")  # fmt: skip
    print("  floors, all sides:  " + ", ".join(f"{k} {v:.2f}" for k, v in floors[2].items())
          + f"; sum {sum(floors[2].values()):.2f}")  # fmt: skip
    print(f"goal: total excluding model p95 <= {GOAL_RATIO:g}x the floors' p95 sum -> {met} "
          f"({no_model[1]:.2f} / {floor[1]:.2f} ms = {ratio:.2f}x)")  # fmt: skip
    return ChatHeadline(
        rows=a.rows, users=a.users, requests=a.requests,
        p50_ms=no_model[0], p95_ms=no_model[1], p99_ms=no_model[2],
        client_p95_ms=rows[CLIENT][1], floor_p50_ms=floor[0], floor_p95_ms=floor[1],
        data=a.locomo.name if a.locomo else "synthetic", locomo_users=locomo_users,
        locomo_memories=locomo_memories, host=describe_host(), floor_apart_p95_ms=apart[1],
        cpu_ms=sum(cpu.values()), floor_cpu_ms=sum(floors[2].values()),
        steps_p95_ms=steps[1],
    )  # fmt: skip


def main() -> int:
    return figure_main(headline, _parser())


if __name__ == "__main__":
    raise SystemExit(main())
