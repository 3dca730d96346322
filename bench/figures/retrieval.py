"""Retrieval latency and insert cost at scale, on a throwaway embedded Postgres.

    python -m bench.figures.retrieval [--rows 1000000] [--users 1000] [--dims 384]
                                    [--big 100000] [--queries 100] [--no-global-hnsw]

Loads `--rows` random unit vectors with COPY (rows arrive interleaved across users, as
they would in production), one user with 1,000 memories and one with `--big`, the
rest spread over the other users. Then, in the same run, for both users:
- the full memwell search (hybrid fused, every score part, filters), exact path;
- a bare exact per-user cosine top-10;
- both again after CLUSTER by (tenant, user_id) (physical layout by user);
- the big user's search through its per-user HNSW index (made by the ANN job),
  with its recall@10 against the exact search;
- a global HNSW index filtered by user;
and the insert rate with and without the global HNSW index.

    python -m bench.figures.retrieval --locomo ../shared/data/locomo/locomo-dev.json

The real-data variant: the LoCoMo conversations consolidated as users beside the
synthetic store (`--rows` over `--users`), each question searched as its user through
the service's own `retrieve` (query embedding + the search statement on the read
pool, as REST, MCP and chat run it), against the floors measured in the same run: the
query embedding at batch 1 and a bare exact top-10 over the same user's rows.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from sqlalchemy.orm import Session

from bench.harness.headline import ReportRow, add_json_flag, figure_main
from bench.harness.host import describe_host, describe_onnx
from bench.harness.progress import progress
from bench.harness.stack import percentile, postgres_only
from memwell.core.settings import get_settings
from memwell.db.driver import libpq_url
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.retrieval.ann import maintain_ann_indexes
from memwell.retrieval.search import SearchFilters, params_from_settings, search_sync

TENANT = "bench"
MODEL = "random-384"
SMALL, BIG = "user-small", "user-big"
WORDS = (
    "tea",
    "coffee",
    "lisbon",
    "berlin",
    "piano",
    "guitar",
    "sister",
    "brother",
    "dog",
    "cat",
    "marathon",
    "yoga",
    "paris",
    "tokyo",
    "pottery",
    "chess",
    "novel",
    "garden",
    "startup",
    "hiking",
)
T0 = datetime(2024, 1, 1, tzinfo=UTC)
COPY_SQL = (
    "COPY memories (tenant, user_id, kind, content, content_hash, embedding, "
    "embedding_model, importance, created_at) FROM STDIN WITH (FORMAT BINARY)"
)
COPY_TYPES = ["varchar", "varchar", "varchar", "text", "varchar", "vector", "varchar",
              "float8", "timestamptz"]  # fmt: skip


def owners(rows: int, users: int, big: int, rng: np.random.Generator) -> np.ndarray:
    """User index per row, shuffled: 0 = big user, 1 = small (1,000), others the rest."""
    small = min(1000, rows // 10)
    rest = rows - big - small
    others = np.arange(rest) % max(users - 2, 1) + 2
    idx = np.concatenate([np.zeros(big, int), np.ones(small, int), others])
    rng.shuffle(idx)
    return idx


def _user(i: int) -> str:
    return BIG if i == 0 else SMALL if i == 1 else f"user-{i:05d}"


def _unit(rng: np.random.Generator, n: int, dims: int) -> np.ndarray:
    v = rng.standard_normal((n, dims), dtype=np.float32)
    unit: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return unit


def _rows(
    start: int, users: np.ndarray, vectors: np.ndarray, model: str, name: Callable[[int], str]
) -> Iterator[tuple[object, ...]]:
    for j, (u, vec) in enumerate(zip(users, vectors, strict=True)):
        i = start + j
        text = f"note {i} about {WORDS[i % len(WORDS)]} and {WORDS[(i * 7) % len(WORDS)]}"
        yield (TENANT, name(int(u)), "fact", text, f"{i:064x}", vec, model,
               0.5, T0 + timedelta(seconds=i))  # fmt: skip


def load(
    url: str,
    owner: np.ndarray,
    dims: int,
    rng: np.random.Generator,
    *,
    model: str = MODEL,
    name: Callable[[int], str] = _user,
) -> float:
    """COPY every row in chunks (row i belongs to user `name(owner[i])`); returns rows/s.

    Also used by the chat benchmarks, with the local embedder's model name so that the
    chat path's retrieval really scans these rows."""
    chunk = 20_000
    started = time.perf_counter()
    with psycopg.connect(libpq_url(url)) as conn, progress("COPY", len(owner)) as bar:
        register_vector(conn)
        for start in range(0, len(owner), chunk):
            part = owner[start : start + chunk]
            with conn.cursor() as cur, cur.copy(COPY_SQL) as copy:
                copy.set_types(COPY_TYPES)
                for row in _rows(start, part, _unit(rng, len(part), dims), model, name):
                    copy.write_row(row)
            conn.commit()
            bar.update(start + len(part))
    rate = len(owner) / (time.perf_counter() - started)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memories")
    settle(url)
    return rate


def settle(url: str) -> None:
    """Bring a freshly loaded store to the state a running service keeps it in.

    - Write the load's dirty pages back now. Left alone, the checkpointer spreads that
      write-back over minutes (checkpoint_completion_target), and its writes and fsyncs
      land in the latencies being measured: the same 1,000-row search gave p95 2.6 to
      5.4 ms across runs that timed it right after a 1M-row load.
    - Read the table and its indexes into shared buffers (pg_prewarm). COPY and VACUUM
      go through a small ring of buffers, so after a load almost nothing is cached, and
      every user's first search read its rows from the OS page cache.
    """
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        if conn.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm'"
        ).fetchone():
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
            conn.execute(
                "SELECT pg_prewarm(c.oid) FROM pg_class c"
                " WHERE c.oid = 'memories'::regclass"
                " OR c.oid IN (SELECT indexrelid FROM pg_index"
                "              WHERE indrelid = 'memories'::regclass)"
            )


def insert_rate(url: str, dims: int, n: int, rng: np.random.Generator, tag: str) -> float:
    """Single-row INSERTs, committed every 50 rows, as the consolidation step writes."""
    started = time.perf_counter()
    with psycopg.connect(libpq_url(url)) as conn:
        register_vector(conn)
        for i, vec in enumerate(_unit(rng, n, dims)):
            conn.execute(
                "INSERT INTO memories (tenant, user_id, kind, content, content_hash, embedding,"
                " embedding_model, importance, created_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                (TENANT, f"user-{i % 900 + 2:05d}", "fact", f"inserted {tag} {i}",
                 f"{tag}-{i}", vec, MODEL, 0.5, T0),
            )  # fmt: skip
            if i % 50 == 49:
                conn.commit()
        conn.commit()
    return n / (time.perf_counter() - started)


def timed(
    label: str, fn: Callable[[np.ndarray], object], queries: np.ndarray
) -> tuple[float, float]:
    print(f"  timing {label}", file=sys.stderr, flush=True)
    fn(queries[0])  # warm the cache and the plan
    ms = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        ms.append((time.perf_counter() - t0) * 1000)
    return percentile(ms, 50), percentile(ms, 95)


def row(
    name: str, n: int, fn: Callable[[np.ndarray], object], queries: np.ndarray
) -> tuple[str, str, float, float]:
    result = (name, f"{n:,}", *timed(name, fn, queries))
    # Also as it comes: a long run that is stopped early keeps what it measured.
    print(f"    {name}: {n:,} rows p50 {result[2]:.2f} ms p95 {result[3]:.2f} ms", file=sys.stderr)
    return result


def full_search(session: Session, user: str, ann_dims: int | None = None) -> Callable[..., object]:
    def run(q: np.ndarray) -> list[object]:
        params = replace(
            params_from_settings(
                get_settings(), tenant=TENANT, user_id=user, query_vector=q, embedding_model=MODEL,
                query_text=f"{WORDS[int(q[0] * 1e6) % len(WORDS)]} plans", k=10, ann_dims=ann_dims,
                filters=SearchFilters(kinds=("fact", "episode"), created_after=T0 - timedelta(1)),
            ),
            similarity_floor=-1.0,
        )  # fmt: skip
        return [h.id for h in search_sync(session, params)]

    return run


def bare_exact(
    conn: psycopg.Connection, user: str, cast: str = "", *, tenant: str = TENANT
) -> Callable[..., object]:
    sql = (
        f"SELECT id FROM memories WHERE tenant = %s AND user_id = %s "
        f"ORDER BY embedding{cast} <=> %s{cast} LIMIT 10"
    )
    return lambda q: conn.execute(sql, (tenant, user, q)).fetchall()


def plan_of(conn: psycopg.Connection, user: str, cast: str, q: np.ndarray) -> str:
    rows = conn.execute(
        f"EXPLAIN SELECT id FROM memories WHERE tenant = %s AND user_id = %s "
        f"ORDER BY embedding{cast} <=> %s{cast} LIMIT 10",
        (TENANT, user, q),
    ).fetchall()
    return "hnsw" if any("hnsw" in r[0] for r in rows) else "btree/seq"


@dataclass(frozen=True)
class RetrievalHeadline:
    """Figure 5: search latency of a 1,000-memory user (exact path) and of the big user
    (the path the service takes for it: its per-user HNSW index)."""

    rows: int
    search_p50_ms: float
    search_p95_ms: float
    bare_p95_ms: float
    big_rows: int
    big_search_p95_ms: float
    big_bare_p95_ms: float

    def report_row(self) -> ReportRow:
        return ReportRow(
            figure=f"5. search, {self.rows:,}-row store",
            measured=f"1k-row user p50 {self.search_p50_ms:.1f} / p95 {self.search_p95_ms:.1f} "
            f"ms; {self.big_rows:,}-row user (per-user HNSW) p95 "
            f"{self.big_search_p95_ms:.1f} ms",
            baseline=f"bare exact top-10 p95 {self.bare_p95_ms:.1f} ms; "
            f"{self.big_rows:,} rows {self.big_bare_p95_ms:.0f} ms",
            goal="p95 <= 3 ms (1k rows), <= 25 ms (100k rows)",
        )


@dataclass
class RetrievalRun:
    """Everything one run measured, in the order it is printed."""

    latency: list[tuple[str, str, float, float]] = field(default_factory=list)
    copy_rate: float = 0.0
    plain_rate: float = 0.0
    ann_build_s: float = 0.0
    ann_indexes: int = 0
    recall: float = 0.0
    hnsw_build_s: float = 0.0
    hnsw_rate: float = 0.0

    def headline(self, rows: int, big: int) -> RetrievalHeadline:
        by_name = {(name, n): (p50, p95) for name, n, p50, p95 in self.latency}
        search = by_name[("memwell search, exact, interleaved", "1,000")]
        bare = by_name[("bare exact cosine top-10, interleaved", "1,000")]
        big_search = by_name[("memwell search, per-user HNSW", f"{big:,}")]
        big_bare = by_name[("bare exact cosine top-10, interleaved", f"{big:,}")]
        return RetrievalHeadline(
            rows=rows, search_p50_ms=search[0], search_p95_ms=search[1], bare_p95_ms=bare[1],
            big_rows=big, big_search_p95_ms=big_search[1], big_bare_p95_ms=big_bare[1],
        )  # fmt: skip


@dataclass(frozen=True)
class LocomoRetrievalHeadline:
    """Figure 5, real text: LoCoMo questions searched as LoCoMo users beside the
    synthetic store, against the query embedding + bare top-10 floors of the same run."""

    rows: int
    questions: int
    users: int
    memories: int
    p50_ms: float  # retrieve(): query embedding + search statement
    p95_ms: float
    embed_p95_ms: float
    statement_p95_ms: float
    floor_p50_ms: float
    floor_p95_ms: float
    host: str = ""

    def report_row(self) -> ReportRow:
        return ReportRow(
            figure=f"5. search, {self.questions} LoCoMo questions to {self.users} LoCoMo users "
            f"({self.memories:,} memories) beside a {self.rows:,}-row store, in-process",
            measured=f"p50 {self.p50_ms:.1f} / p95 {self.p95_ms:.1f} ms = "
            f"**{self.p50_ms / self.floor_p50_ms:.2f}x / {self.p95_ms / self.floor_p95_ms:.2f}x** "
            f"the floors (embedding p95 {self.embed_p95_ms:.1f}, statement p95 "
            f"{self.statement_p95_ms:.1f} ms)",
            baseline=f"query embedding (batch 1) + bare exact top-10: p50 "
            f"{self.floor_p50_ms:.1f} / p95 {self.floor_p95_ms:.1f} ms",
            goal="none set here (through the SDK: p50 <= 1.3x, p95 <= 1.5x)",
        )


async def _time_retrieve(
    database_url: str, asks: list[tuple[str, str]], warmup: int
) -> dict[str, list[float]]:
    """The service's retrieve() per question, with its embed and statement laps."""
    from memwell.core.timing import Stopwatch
    from memwell.retrieval.service import build_retrieval, retrieve

    deps = build_retrieval(get_settings(), database_url=database_url, access=None)
    out: dict[str, list[float]] = {"total": [], "embed": [], "retrieve": []}
    try:
        for n, (user, question) in enumerate(asks):
            watch = Stopwatch()
            t0 = time.perf_counter()
            await retrieve(deps, tenant="locomo", user_id=user, query=question, k=10,
                           watch=watch)  # fmt: skip
            if n >= warmup:
                out["total"].append((time.perf_counter() - t0) * 1000)
                out["embed"].append(watch.timings.get("embed", 0.0))
                out["retrieve"].append(watch.timings.get("retrieve", 0.0))
    finally:
        await deps.reads.close()
    return out


def measure_locomo(a: argparse.Namespace) -> tuple[LocomoRetrievalHeadline, list[list[str]]]:
    """Figure 5 on LoCoMo users beside the synthetic store; (headline, table rows)."""
    from bench.harness.real_store import locomo_asks, locomo_beside_synthetic
    from memwell.core.settings import Settings
    from memwell.embeddings import build_embedder

    with locomo_beside_synthetic(a.locomo, rows=a.rows, users=a.users) as store:
        url = store.stack.database_url
        asks = [(x.user_id, x.question) for x in locomo_asks(store, a.warmup + a.questions)]
        print(f"  timing retrieve() on {a.questions} questions", file=sys.stderr)
        service = asyncio.run(_time_retrieve(url, asks, a.warmup))
        timed = asks[a.warmup :]
        print("  measuring the floors", file=sys.stderr)
        embedder = build_embedder(Settings(embedding_provider="local"), for_queries=True)
        embedder.embed([asks[0][1]])
        embed_ms, bare_ms = [], []
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            register_vector(conn)
            bare_exact(conn, timed[0][0], tenant="locomo")(embedder.embed([timed[0][1]])[0])
            # Interleaved, as a search does the work: embed, then scan, then the next.
            for user, question in timed:
                top = bare_exact(conn, user, tenant="locomo")
                t0 = time.perf_counter()
                vector = embedder.embed([question])[0]
                t1 = time.perf_counter()
                top(vector)
                t2 = time.perf_counter()
                embed_ms.append((t1 - t0) * 1000)
                bare_ms.append((t2 - t1) * 1000)
        memories = sum(store.memories.values())
        users = len(store.memories)
    floor = [percentile(embed_ms, q) + percentile(bare_ms, q) for q in (50, 95)]
    table = [
        ["retrieve(): embedding + statement", *_p(service["total"])],
        ["  of which: query embedding stage", *_p(service["embed"])],
        ["  of which: search statement stage", *_p(service["retrieve"])],
        ["floor: query embedding, batch 1", *_p(embed_ms)],
        ["floor: bare exact top-10 of the user", *_p(bare_ms)],
        ["floor: sum", f"{floor[0]:.2f}", f"{floor[1]:.2f}"],
    ]
    total = service["total"]
    return LocomoRetrievalHeadline(
        rows=a.rows, questions=a.questions, users=users, memories=memories,
        p50_ms=percentile(total, 50), p95_ms=percentile(total, 95),
        embed_p95_ms=percentile(service["embed"], 95),
        statement_p95_ms=percentile(service["retrieve"], 95),
        floor_p50_ms=floor[0], floor_p95_ms=floor[1], host=describe_host(),
    ), table  # fmt: skip


def _p(values: list[float]) -> list[str]:
    return [f"{percentile(values, 50):.2f}", f"{percentile(values, 95):.2f}"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--dims", type=int, default=384)
    p.add_argument("--big", type=int, default=100_000)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument(
        "--small-queries",
        type=int,
        default=500,
        help="queries timed on the 1,000-row user (cheap; a steadier p95)",
    )
    p.add_argument("--inserts", type=int, default=2000)
    p.add_argument("--no-global-hnsw", action="store_true")
    p.add_argument(
        "--locomo",
        type=Path,
        default=None,
        metavar="FILE",
        help="the real-data variant: LoCoMo users beside the synthetic store",
    )
    p.add_argument("--questions", type=int, default=300, help="with --locomo: questions timed")
    p.add_argument("--warmup", type=int, default=20, help="with --locomo: questions not timed")
    add_json_flag(p)
    return p


def measure(a: argparse.Namespace) -> RetrievalRun:
    """Load the store, then time every query kind and the insert rates."""
    rng = np.random.default_rng(7)
    big = min(a.big, a.rows // 2)
    queries = _unit(rng, a.queries, a.dims)
    # Their own generator: the store's rows stay those of every earlier run.
    small_queries = _unit(np.random.default_rng(11), a.small_queries, a.dims)
    cast = f"::vector({a.dims})"
    run = RetrievalRun()
    out = run.latency
    with postgres_only() as stack:
        url = stack.database_url
        print(f"loading {a.rows:,} rows, {a.users} users, {a.dims} dims", file=sys.stderr)
        run.copy_rate = load(url, owners(a.rows, a.users, big, rng), a.dims, rng)
        run.plain_rate = insert_rate(url, a.dims, a.inserts, rng, "plain")
        settle(url)
        engine = make_engine(url, pool_size=1)
        sessions = make_sessionmaker(engine)
        with psycopg.connect(libpq_url(url), autocommit=True) as conn, sessions() as session:
            register_vector(conn)
            for layout in ("interleaved", "clustered"):
                if layout == "clustered":
                    session.rollback()  # CLUSTER waits for every open transaction
                    print("  CLUSTER memories USING ix_memories_user", file=sys.stderr)
                    conn.execute("CLUSTER memories USING ix_memories_user")
                    conn.execute("ANALYZE memories")
                    settle(url)  # CLUSTER rewrote the table and its indexes
                for user, n, qs in ((SMALL, 1000, small_queries), (BIG, big, queries)):
                    search, bare = full_search(session, user), bare_exact(conn, user)
                    out.append(row(f"memwell search, exact, {layout}", n, search, qs))
                    out.append(row(f"bare exact cosine top-10, {layout}", n, bare, qs))
            session.rollback()  # CREATE INDEX CONCURRENTLY waits for open transactions
            t0 = time.perf_counter()
            changes = maintain_ann_indexes(engine, threshold=min(50_000, big))
            run.ann_build_s, run.ann_indexes = time.perf_counter() - t0, len(changes)
            ann_search = full_search(session, BIG, a.dims)
            out.append(row("memwell search, per-user HNSW", big, ann_search, queries))
            exact = full_search(session, BIG)
            ann = full_search(session, BIG, a.dims)
            overlaps = [len(set(exact(q)) & set(ann(q))) / 10 for q in queries[:30]]  # type: ignore[call-overload]
            run.recall = float(np.mean(overlaps))
            session.rollback()
            if not a.no_global_hnsw:
                print("  building a global HNSW index (slow)", file=sys.stderr)
                conn.execute("SET maintenance_work_mem = '2GB'")
                t0 = time.perf_counter()
                conn.execute(f"CREATE INDEX ix_bench_global_hnsw ON memories USING hnsw "
                             f"((embedding{cast}) vector_cosine_ops)")  # fmt: skip
                run.hnsw_build_s = time.perf_counter() - t0
                conn.execute("ANALYZE memories")
                conn.execute("SET hnsw.iterative_scan = relaxed_order")
                for user, n in ((SMALL, 1000), (BIG, big)):
                    plan = plan_of(conn, user, cast, queries[0])
                    hnsw = bare_exact(conn, user, cast)
                    out.append(row(f"global HNSW filtered by user ({plan})", n, hnsw, queries))
                run.hnsw_rate = insert_rate(url, a.dims, a.inserts // 4, rng, "hnsw")
        engine.dispose()
    return run


def print_run(a: argparse.Namespace, run: RetrievalRun) -> None:
    print(f"\nretrieval latency, {a.rows:,} rows, {a.users} users, {a.dims} dims; queries: "
          f"{a.small_queries} on the 1,000-row user, {a.queries} on the others")  # fmt: skip
    print(f"{'query':<44}{'user rows':>10}{'p50 ms':>9}{'p95 ms':>9}")
    for name, n, p50, p95 in run.latency:
        print(f"{name:<44}{n:>10}{p50:>9.2f}{p95:>9.2f}")
    print(f"\nper-user HNSW: built in {run.ann_build_s:.1f} s ({run.ann_indexes} index), "
          f"recall@10 vs exact search {run.recall:.3f}")  # fmt: skip
    print("\ninsert rate (single-row INSERT, commit every 50)")
    print(f"  COPY bulk load:            {run.copy_rate:>10,.0f} rows/s")
    print(f"  without global HNSW:       {run.plain_rate:>10,.0f} rows/s")
    if not a.no_global_hnsw:
        print(f"  with global HNSW:          {run.hnsw_rate:>10,.0f} rows/s "
              f"(index build {run.hnsw_build_s:.0f} s)")  # fmt: skip


def headline(argv: list[str] | None = None) -> RetrievalHeadline | LocomoRetrievalHeadline | None:
    """Figure 5's headline numbers (prints the full table too); None: no LoCoMo data."""
    a = _parser().parse_args(argv)
    print(f"host: {describe_host()}\nonnx: {describe_onnx()}")
    if a.locomo is not None:
        if not a.locomo.exists():
            print(f"skipped: LoCoMo data not found at {a.locomo}")
            return None
        found, table = measure_locomo(a)
        print(f"\nsearch with {found.questions} LoCoMo questions, {found.users} LoCoMo users "
              f"({found.memories:,} memories) beside {a.rows:,} synthetic rows (ms)")  # fmt: skip
        print(f"{'what':<40}{'p50':>9}{'p95':>9}")
        for name, p50, p95 in table:
            print(f"{name:<40}{p50:>9}{p95:>9}")
        print(f"ratio to the floors: p50 {found.p50_ms / found.floor_p50_ms:.2f}x, "
              f"p95 {found.p95_ms / found.floor_p95_ms:.2f}x")  # fmt: skip
        return found
    run = measure(a)
    print_run(a, run)
    return run.headline(a.rows, min(a.big, a.rows // 2))


def main() -> int:
    return figure_main(headline, _parser())


if __name__ == "__main__":
    raise SystemExit(main())
