"""Server time of each console page for a user with 100k memories (goal: 200 ms).

    python -m bench.figures.console [--memories 100000] [--requests 30] [--no-ann]

A throwaway stack (embedded Postgres + Valkey) and the real API as a subprocess with
auth disabled, as `memwell up` runs it. One user gets `--memories` memories (COPY,
384-dim random unit vectors under the local model's name, so search scans them) plus
history events, a session with turns and a few dead letters; the per-user HNSW index
is built as the ANN job would for a user this size (unless `--no-ann`). Each page is
requested `--requests` times after a warm-up; the time is the page's own Server-Timing
(handler start to rendered page), so loopback HTTP is not counted. Search queries all
differ, so each one pays its query embedding.

The workers panel is not a page: it waits up to its ping timeout for Celery replies
and loads after the health page. It is shown for completeness, outside the goal, as is
REST search (one `retrieve`, timed round trip) for comparison with the playground.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from bench.harness.api_server import serve_api
from bench.harness.common import percentile, print_table
from bench.harness.headline import ReportRow, add_json_flag, write_json
from bench.harness.host import describe_host
from bench.harness.progress import progress
from bench.harness.stack import BenchStack, services
from memwell.core.settings import Settings
from memwell.db.driver import libpq_url
from memwell.db.engine import make_engine
from memwell.embeddings import build_embedder
from memwell.retrieval.ann import maintain_ann_indexes

TENANT = "default"  # auth disabled: the console acts as the default tenant
USER = "user-100k"
GOAL_MS = 200.0
WORDS = ("tea", "coffee", "lisbon", "berlin", "piano", "guitar", "sister", "brother",
         "dog", "cat", "marathon", "yoga", "paris", "tokyo", "pottery", "chess", "novel",
         "garden", "startup", "hiking", "allergy", "peanuts", "nurse", "violin")  # fmt: skip
KINDS = ("fact", "preference", "event", "fact", "fact")
T0 = datetime(2025, 1, 1, tzinfo=UTC)
COPY_SQL = (
    "COPY memories (tenant, user_id, kind, content, content_hash, embedding, "
    "embedding_model, importance, created_at, updated_at, session_id, source_turn_ids) "
    "FROM STDIN WITH (FORMAT BINARY)"
)
COPY_TYPES = ["varchar", "varchar", "varchar", "text", "varchar", "vector", "varchar",
              "float8", "timestamptz", "timestamptz", "varchar", "text[]"]  # fmt: skip


@dataclass(frozen=True)
class Headline:
    slowest_page: str
    slowest_p95_ms: float
    memories: int
    host: str

    def report_row(self) -> ReportRow:
        return ReportRow(
            figure="console pages, user with 100k memories",
            measured=f"slowest p95 {self.slowest_p95_ms:.0f} ms ({self.slowest_page})",
            baseline="-",
            goal=f"≤ {GOAL_MS:.0f} ms server time",
        )


def _content(i: int) -> str:
    return (
        f"memory {i}: the user mentioned {WORDS[i % len(WORDS)]} and "
        f"{WORDS[(i * 7 + 3) % len(WORDS)]} <b>#{i % 97}</b>"
    )


def load_user(url: str, n: int, model: str, dims: int) -> None:
    """COPY `n` memories of one user, in chunks, then analyze and checkpoint."""
    rng = np.random.default_rng(7)
    chunk = 20_000
    with psycopg.connect(libpq_url(url)) as conn, progress("COPY", n) as bar:
        register_vector(conn)
        for start in range(0, n, chunk):
            size = min(chunk, n - start)
            vectors = rng.standard_normal((size, dims), dtype=np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            with conn.cursor() as cur, cur.copy(COPY_SQL) as copy:
                copy.set_types(COPY_TYPES)
                for j in range(size):
                    i = start + j
                    at = T0 + timedelta(seconds=i)
                    copy.write_row((TENANT, USER, KINDS[i % len(KINDS)], _content(i),
                                    f"{i:064x}", vectors[j], model, (i % 10) / 10, at, at,
                                    f"session-{i % 20}", [f"turn-{i}"]))  # fmt: skip
            conn.commit()
            bar.update(start + size)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memories")
        conn.execute("CHECKPOINT")


def add_story(url: str) -> str:
    """History for one memory, a session with turns, and dead letters; returns the
    memory's id."""
    with psycopg.connect(libpq_url(url)) as conn:
        memory_id = conn.execute(
            "SELECT id FROM memories WHERE tenant = %s AND user_id = %s"
            " ORDER BY created_at DESC LIMIT 1",
            (TENANT, USER),
        ).fetchone()
        assert memory_id is not None
        for k, event in enumerate(("add", "reinforce", "merge", "update")):
            conn.execute(
                "INSERT INTO memory_events (tenant, user_id, memory_id, event, old_content,"
                " new_content, reason) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (TENANT, USER, memory_id[0], event, f"before {k}", f"after {k}", "bench"),
            )
        conn.execute(
            "INSERT INTO sessions (tenant, user_id, id, status, summary, turn_count)"
            " VALUES (%s, %s, 'session-0', 'open', 'A long conversation.', 40)",
            (TENANT, USER),
        )
        for t in range(40):
            conn.execute(
                "INSERT INTO turns (tenant, id, user_id, session_id, role, content, created_at,"
                " token_count, status) VALUES (%s, %s, %s, 'session-0', %s, %s, now(), 8,"
                " 'processed')",
                (TENANT, f"turn-{t}", USER, ("user", "assistant")[t % 2], _content(t)),
            )
        for d in range(5):
            conn.execute(
                "INSERT INTO dead_letters (task_name, tenant, payload, error, attempts)"
                " VALUES ('memwell.consolidate_turns', %s, '{}', %s, 5)",
                (TENANT, f"RuntimeError: bench failure {d}"),
            )
        conn.commit()
    return str(memory_id[0])


def server_ms(response: httpx.Response) -> float:
    match = re.search(r"dur=([\d.]+)", response.headers.get("server-timing", ""))
    if response.status_code != 200 or match is None:
        raise RuntimeError(f"{response.request.url}: {response.status_code} {response.text[:300]}")
    return float(match.group(1))


def measure(client: httpx.Client, path: Callable[[int], str], requests: int) -> list[float]:
    server_ms(client.get(path(-1)))  # warm the plan and the pools
    return [server_ms(client.get(path(i))) for i in range(requests)]


def rest_search(client: httpx.Client, requests: int) -> list[float]:
    """The same kind of query through POST /v1/memories/search: one `retrieve`, for
    comparison with the playground's page (which runs two at once)."""
    times = []
    for i in range(-1, requests):
        body = {"user_id": USER, "query": f"rest about {WORDS[i % len(WORDS)]} {i}", "k": 10}
        started = time.perf_counter()
        response = client.post("/v1/memories/search", json=body)
        elapsed = (time.perf_counter() - started) * 1000
        response.raise_for_status()
        if i >= 0:
            times.append(elapsed)
    return times


def cursor_of(client: httpx.Client, first_page: str) -> str:
    """The next-page link of a list page, as the browser would follow it."""
    found = re.search(r'class="next" href="([^"]+)"', client.get(first_page).text)
    assert found, "the first page has no next page"
    return found.group(1).replace("&amp;", "&")


def pages(memory_id: str, client: httpx.Client) -> dict[str, Callable[[int], str]]:
    user = f"/console/user?id={USER}"
    second = cursor_of(client, user)
    second_by_importance = cursor_of(client, user + "&sort=importance")
    as_of = (datetime.now(UTC) - timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "users": lambda i: "/console/users",
        "user, first page": lambda i: user,
        "user, next page": lambda i: second,
        "user, next page by importance": lambda i: second_by_importance,
        "user, kind filter": lambda i: user + "&kind=preference",
        "user, text filter": lambda i: f"{user}&q={WORDS[i % len(WORDS)]}",
        "profile (no entities: the user check)": lambda i: f"/console/user/profile?id={USER}",
        "memory": lambda i: f"/console/memories/{memory_id}",
        "session": lambda i: f"/console/session?user={USER}&id=session-0",
        "search": lambda i: f"/console/search?user={USER}&q=what+about+{WORDS[i % 24]}+{i}",
        "search, as_of": lambda i: (
            f"/console/search?user={USER}&q=ask+{WORDS[i % 24]}+{i}&as_of={as_of}"
        ),
        "search, overrides": lambda i: (
            f"/console/search?user={USER}&q=more+{i}&w_rec=1&floor=0.05&fusion=score"
        ),
        "pipeline health": lambda i: "/console/health",
    }


def run(stack: BenchStack, memories: int, requests: int, ann: bool) -> list[tuple[object, ...]]:
    settings = Settings()
    embedder = build_embedder(settings, for_queries=True)
    print(f"  loading {memories:,} memories ({embedder.model_name})", file=sys.stderr)
    load_user(stack.database_url, memories, embedder.model_name, embedder.dimensions)
    memory_id = add_story(stack.database_url)
    if ann:
        print("  building the user's HNSW index (the ANN job's work)", file=sys.stderr)
        started = time.perf_counter()
        engine = make_engine(stack.database_url, pool_size=1)
        maintain_ann_indexes(engine, threshold=min(settings.ann_threshold_rows, memories))
        engine.dispose()
        print(f"  built in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    rows: list[tuple[object, ...]] = []
    load_before = os.getloadavg()[0]
    with (
        serve_api(stack, env={"MEMWELL_AUTH_DISABLED": "true"}) as api,
        httpx.Client(base_url=api.url, timeout=60) as client,
    ):
        for name, path in pages(memory_id, client).items():
            print(f"  timing {name}", file=sys.stderr, flush=True)
            ms = measure(client, path, requests)
            p95 = percentile(ms, 95)
            rows.append((name, percentile(ms, 50), p95, "yes" if p95 <= GOAL_MS else "NO"))
        rest = rest_search(client, requests)
        rows.append(("(REST search, round trip)", percentile(rest, 50), percentile(rest, 95), "-"))
        workers = measure(client, lambda i: "/console/health/workers", 3)
        rows.append(("(workers panel: a ping)", percentile(workers, 50), max(workers), "-"))
    # Server time is CPU time on a shared host: say how busy it was while timing.
    print(f"  load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}", file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--no-ann", action="store_true", help="search by the exact scan")
    add_json_flag(parser)
    args = parser.parse_args()
    host = describe_host()
    with services() as stack:
        rows = run(stack, args.memories, args.requests, ann=not args.no_ann)
    print(f"\nConsole server time, one user with {args.memories:,} memories "
          f"({'per-user HNSW' if not args.no_ann else 'exact scan'}); {args.requests} "
          f"requests per page\nHost: {host}\n")  # fmt: skip
    print_table(["page", "p50 ms", "p95 ms", f"≤ {GOAL_MS:.0f} ms"], rows)
    timed = [r for r in rows if r[3] != "-"]
    worst = max(timed, key=lambda r: float(str(r[2])))
    write_json(Headline(str(worst[0]), float(str(worst[2])), args.memories, host), args.json)


if __name__ == "__main__":
    main()
