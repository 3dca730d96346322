"""Search latency with the entity term, against the statement without it, in one run.

    python -m bench.figures.entity_search [--rows 200000] [--users 200] [--big 100000]
                                          [--queries 60] [--dims 384]

Loads random memories with the retrieval figure's loader (one 1,000-memory user, one
with `--big`, the rest spread over the other users), then gives the two measured users
an entity graph shaped like a chat user's:
- their own name ("Ada") linked to 70% of their memories;
- one entity per 20 memories, mention counts Zipf-distributed (capped at a quarter of
  the memories), each related to two others; the user's own entity related to a tenth.

For queries that name (a) an unknown name, (b) one rare entity, (c) only the user's
own name, it times the search with `entity_weight` 0 (the statement without the entity
term: the floor) and with the setting, alternating per query, on the exact path of
both users and on the big user's per-user HNSW path. Prints p50/p95 and the p95 ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import psycopg
from sqlalchemy.orm import Session

from bench.figures.retrieval import BIG, MODEL, SMALL, TENANT, _unit, load, owners, settle
from bench.harness.host import describe_host
from bench.harness.stack import percentile, postgres_only
from memwell.core.settings import get_settings
from memwell.db.driver import libpq_url
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.retrieval.ann import maintain_ann_indexes
from memwell.retrieval.search import Overrides, params_from_settings, search_sync

OWN_NAME = "Ada"
QUERY_KINDS = {
    "unknown name": lambda name: "What did Zephyrine say about the trip?",
    "rare entity": lambda name: f"What did {name} say about the trip?",
    "own name only": lambda name: f"What did {OWN_NAME} say about the trip?",
}
OFF = Overrides(entity_weight=0.0)


@dataclass(frozen=True)
class Graph:
    """One user's entity names, rare ones first chosen by the queries."""

    names: list[str]


def _copy(conn: psycopg.Connection, sql: str, rows: list[tuple[object, ...]]) -> None:
    with conn.cursor() as cur, cur.copy(sql) as copy:
        for r in rows:
            copy.write_row(r)


def add_entities(url: str, user: str, rng: np.random.Generator) -> Graph:
    """The user's entity graph (see the module docstring), written with COPY."""
    with psycopg.connect(libpq_url(url)) as conn:
        memories = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM memories WHERE tenant = %s AND user_id = %s", (TENANT, user)
            )
        ]
        n = len(memories)
        count = max(50, n // 20)
        names = [f"Name{user[-3:]}{j}" for j in range(count)]
        mentions = np.minimum(rng.zipf(1.6, count), max(n // 4, 1))
        own = uuid.uuid4()
        ids = [uuid.uuid4() for _ in names]
        entities = [(own, TENANT, user, OWN_NAME.lower(), OWN_NAME, "person", int(n * 0.7))]
        entities += [
            (e, TENANT, user, name.lower(), name, "other", int(m))
            for e, name, m in zip(ids, names, mentions, strict=True)
        ]
        _copy(
            conn,
            "COPY entities (id, tenant, user_id, key, name, kind, mention_count) FROM STDIN",
            entities,
        )
        _copy(
            conn,
            "COPY entity_aliases (tenant, user_id, alias, entity_id) FROM STDIN",
            [(TENANT, user, key, e) for e, _, _, key, *_ in entities],
        )
        links: list[tuple[object, ...]] = []
        for e, _, _, _, _, _, m in entities:
            for i in rng.choice(n, size=m, replace=False):
                links.append((memories[i], e, TENANT, user))
        _copy(
            conn, "COPY memory_entities (memory_id, entity_id, tenant, user_id) FROM STDIN", links
        )
        edges = [(ids[j], ids[int(k)]) for j in range(count) for k in rng.integers(0, count, 2)]
        edges += [(own, ids[int(k)]) for k in rng.choice(count, size=count // 10, replace=False)]
        _copy(
            conn,
            "COPY entity_relations (tenant, user_id, subject_id, relation, object_id) FROM STDIN",
            [(TENANT, user, s, "likes", o) for s, o in edges if s != o],
        )
        conn.commit()
        conn.execute("ANALYZE entities, entity_aliases, memory_entities, entity_relations")
    print(f"  {user}: {count + 1} entities, {len(links):,} links, {len(edges)} relations",
          file=sys.stderr)  # fmt: skip
    return Graph(names=names)


def _search(session: Session, user: str, ann_dims: int | None) -> Callable[..., int]:
    settings = get_settings()

    def run(q: np.ndarray, text: str, overrides: Overrides | None) -> int:
        params = params_from_settings(
            settings, tenant=TENANT, user_id=user, query_vector=q, embedding_model=MODEL,
            query_text=text, k=10, ann_dims=ann_dims, overrides=overrides,
        )  # fmt: skip
        return len(search_sync(session, params))

    return run


def compare(
    label: str, run: Callable[..., int], queries: np.ndarray, graph: Graph, rng: np.random.Generator
) -> list[tuple[str, str, float, float, float, float]]:
    """Off and on for each query, in a random order per query; p50/p95 of each."""
    rows = []
    rare = graph.names[len(graph.names) // 2 :]  # the Zipf tail: a few mentions each
    for kind, text_of in QUERY_KINDS.items():
        print(f"  timing {label}: {kind}", file=sys.stderr, flush=True)
        run(queries[0], text_of(rare[0]), None)  # warm the plan and the cache
        run(queries[0], text_of(rare[0]), OFF)
        ms: dict[bool, list[float]] = {False: [], True: []}
        for i, q in enumerate(queries):
            text = text_of(rare[i % len(rare)])
            for on in rng.permutation([False, True]):
                t0 = time.perf_counter()
                run(q, text, None if on else OFF)
                ms[bool(on)].append((time.perf_counter() - t0) * 1000)
        rows.append((label, kind, percentile(ms[False], 50), percentile(ms[False], 95),
                     percentile(ms[True], 50), percentile(ms[True], 95)))  # fmt: skip
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--users", type=int, default=200)
    p.add_argument("--big", type=int, default=100_000)
    p.add_argument("--dims", type=int, default=384)
    p.add_argument("--queries", type=int, default=60)
    a = p.parse_args()
    rng = np.random.default_rng(7)
    big = min(a.big, a.rows // 2)
    queries = _unit(np.random.default_rng(11), a.queries, a.dims)
    results = []
    with postgres_only() as stack:
        url = stack.database_url
        print(f"loading {a.rows:,} rows, {a.users} users, {a.dims} dims", file=sys.stderr)
        load(url, owners(a.rows, a.users, big, rng), a.dims, rng)
        graphs = {user: add_entities(url, user, rng) for user in (SMALL, BIG)}
        settle(url)
        engine = make_engine(url, pool_size=1)
        with make_sessionmaker(engine)() as session:
            for user, n in ((SMALL, 1000), (BIG, big)):
                label = f"exact, {n:,} rows"
                results += compare(label, _search(session, user, None), queries, graphs[user], rng)
            session.rollback()  # CREATE INDEX CONCURRENTLY waits for open transactions
            maintain_ann_indexes(engine, threshold=min(50_000, big))
            settle(url)
            ann = _search(session, BIG, a.dims)
            results += compare(f"HNSW, {big:,} rows", ann, queries, graphs[BIG], rng)
        engine.dispose()
    print(f"\nsearch latency, entity term off (floor) and on, {a.rows:,} rows; {describe_host()}")
    print(f"{'path':<22}{'query names':<16}{'off p50':>9}{'off p95':>9}{'on p50':>9}"
          f"{'on p95':>9}{'p95 x':>7}")  # fmt: skip
    for label, kind, p50_off, p95_off, p50_on, p95_on in results:
        print(f"{label:<22}{kind:<16}{p50_off:>9.2f}{p95_off:>9.2f}{p50_on:>9.2f}"
              f"{p95_on:>9.2f}{p95_on / p95_off:>7.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
