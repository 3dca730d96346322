"""Per-user ANN indexes for the rare huge user, made and dropped by a maintenance job.

An exact scan of one user's rows beats any index up to tens of thousands of rows (see
docs/retrieval.md). Above `ann_threshold_rows` live memories of one embedding model,
a user gets a partial HNSW index of their own:

    CREATE INDEX CONCURRENTLY ix_ann_<hash> ON memories
      USING hnsw ((embedding::vector(d)) vector_cosine_ops)
      WHERE tenant = '<t>' AND user_id = '<u>' AND embedding_model = '<m>'

The same job gives that user a partial GIN index over `fts` with the same predicate:
the ANN path's full-text candidates then come from that user's postings alone, where
the global GIN index returned every user's matches and the planner intersected them
with a bitmap of all the user's rows (measured, 100k-row user: 21 ms of 41).

`memories.embedding` has no fixed dimension (rows record their model), so the index is
on an expression cast to the model's dimension, and the query orders by the same
expression with the same predicate, which is how the planner matches it. The index is
dropped when the user falls under half the threshold (hysteresis: no flapping).
`memory_ann_indexes` records which exist; the query path reads it through a small
per-process cache.

Inserting into HNSW is not cheap: each new row searches the graph and rewrites its
neighbours' links, and for a 50,000-row user that was half of a reconcile batch. So
the index leaves out rows with `ann_deferred` set (its predicate ends in
`AND NOT ann_deferred`). Reconcile writes such a user's new rows deferred; every
search reads those few rows exactly, through `ix_memories_ann_tail`, beside the
index; and `fold_ann_tails`, a beat job, clears the flag in small batches, which is
when the index takes them, off the batch's path and outside the user's lock.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from psycopg import sql
from sqlalchemy import Connection, Engine, text

from memwell.db.read_pool import TenantReadPool

log = logging.getLogger(__name__)

# Built once per user; these trade build time for recall on ~50k-1M rows.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64


@dataclass(frozen=True)
class AnnChange:
    tenant: str
    user_id: str
    embedding_model: str
    action: str  # "created" | "rebuilt" | "dropped"
    rows: int


def _digest(tenant: str, user_id: str, model: str) -> str:
    return hashlib.sha256(f"{tenant}\x00{user_id}\x00{model}".encode()).hexdigest()[:20]


def index_name(tenant: str, user_id: str, model: str) -> str:
    """A stable, short (< 63 bytes) name for one user's index of folded rows. Indexes
    that still hold the deferred tail were named without the suffix; the registry
    records which name a user's index has."""
    return f"ix_ann_{_digest(tenant, user_id, model)}_folded"


def text_index_name(tenant: str, user_id: str, model: str) -> str:
    """The name of the user's full-text index, made and dropped with the ANN index."""
    return f"ix_ann_{_digest(tenant, user_id, model)}_fts"


def _create_text_sql(name: str, tenant: str, user_id: str, model: str) -> sql.Composed:
    return sql.SQL(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON memories USING gin (fts) "
        "WHERE tenant = {tenant} AND user_id = {user} AND embedding_model = {model}"
    ).format(
        name=sql.Identifier(name),
        tenant=sql.Literal(tenant),
        user=sql.Literal(user_id),
        model=sql.Literal(model),
    )


def _drop_sql(name: str) -> sql.Composed:
    return sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name))


def _create_sql(name: str, tenant: str, user_id: str, model: str, dims: int) -> sql.Composed:
    # Literals, not parameters: DDL takes none, and the planner must see the same
    # constants in the index predicate as the query binds. sql.Literal quotes safely.
    return sql.SQL(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON memories USING hnsw "
        "((embedding::vector({dims})) vector_cosine_ops) WITH (m = {m}, ef_construction = {ef}) "
        "WHERE tenant = {tenant} AND user_id = {user} AND embedding_model = {model} "
        "AND NOT ann_deferred"
    ).format(
        name=sql.Identifier(name),
        dims=sql.Literal(int(dims)),
        m=sql.Literal(HNSW_M),
        ef=sql.Literal(HNSW_EF_CONSTRUCTION),
        tenant=sql.Literal(tenant),
        user=sql.Literal(user_id),
        model=sql.Literal(model),
    )


_SIZES = text(
    """
    SELECT tenant, user_id, embedding_model, count(*) AS n,
           max(vector_dims(embedding)) AS dims, min(vector_dims(embedding)) AS min_dims
    FROM memories
    WHERE deleted_at IS NULL AND embedding IS NOT NULL AND embedding_model IS NOT NULL
    GROUP BY tenant, user_id, embedding_model
    HAVING count(*) >= :low
    """
)


_REGISTER = text(
    """
    INSERT INTO memory_ann_indexes
      (tenant, user_id, embedding_model, index_name, dims, rows_at_build, defers_new_rows)
    VALUES (:t, :u, :m, :name, :dims, :n, true)
    ON CONFLICT (tenant, user_id, embedding_model) DO UPDATE
      SET index_name = excluded.index_name, dims = excluded.dims,
          rows_at_build = excluded.rows_at_build, defers_new_rows = true
    """
)


def _build(
    conn: Connection, key: tuple[str, str, str], dims: int, rows: int, *, replacing: str | None
) -> str:
    """Build the user's HNSW index of folded rows and its full-text twin, register it,
    then drop `replacing`, the index it succeeds, if any (the registry names one or
    the other at every moment, and searches are correct against either)."""
    raw = conn.connection.dbapi_connection
    assert raw is not None
    name = index_name(*key)
    _run(raw, _create_sql(name, *key, dims))
    _run(raw, _create_text_sql(text_index_name(*key), *key))
    conn.execute(
        _REGISTER,
        {"t": key[0], "u": key[1], "m": key[2], "name": name, "dims": dims, "n": rows},
    )
    if replacing is not None and replacing != name:
        _run(raw, _drop_sql(replacing))
    return name


def _run(raw: Any, statement: sql.Composed) -> None:
    """DDL on the autocommit driver connection (CONCURRENTLY refuses a transaction)."""
    with raw.cursor() as cur:
        cur.execute(statement)


def maintain_ann_indexes(engine: Engine, *, threshold: int) -> list[AnnChange]:
    """Create indexes for users at or above `threshold`, drop those under threshold/2.

    Safe to run twice at once: CREATE/DROP ... CONCURRENTLY IF [NOT] EXISTS and the
    registry upsert are idempotent. Runs in autocommit (CONCURRENTLY requires it).
    """
    changes: list[AnnChange] = []
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        sizes = {
            (r.tenant, r.user_id, r.embedding_model): r
            for r in conn.execute(_SIZES, {"low": max(threshold // 2, 1)})
        }
        registered = {
            (r.tenant, r.user_id, r.embedding_model): r
            for r in conn.execute(
                text(
                    "SELECT tenant, user_id, embedding_model, index_name, defers_new_rows "
                    "FROM memory_ann_indexes"
                )
            )
        }
        existing = {key: r.index_name for key, r in registered.items()}
        raw = conn.connection.dbapi_connection
        assert raw is not None
        for key, row in sizes.items():
            if row.dims != row.min_dims:
                continue
            if key in existing:
                # Indexes built before the text index existed get it now (else a no-op).
                _run(raw, _create_text_sql(text_index_name(*key), *key))
                if not registered[key].defers_new_rows:
                    # Built when every new row went into the graph: replaced by one
                    # that leaves the deferred tail out.
                    _build(conn, key, row.dims, row.n, replacing=existing[key])
                    log.info("ann index %s rebuilt for %s", existing[key], key)
                    changes.append(AnnChange(*key, action="rebuilt", rows=int(row.n)))
                continue
            if row.n < threshold:
                continue
            started = time.perf_counter()
            name = _build(conn, key, row.dims, row.n, replacing=None)
            log.info(
                "ann index %s built for %s in %.1f s", name, key, time.perf_counter() - started
            )
            changes.append(AnnChange(*key, action="created", rows=int(row.n)))
        for key, name in existing.items():
            if key in sizes:
                continue
            # Unregister first: the query path stops naming the index before it goes.
            conn.execute(
                text(
                    "DELETE FROM memory_ann_indexes "
                    "WHERE tenant = :t AND user_id = :u AND embedding_model = :m"
                ),
                {"t": key[0], "u": key[1], "m": key[2]},
            )
            _run(raw, _drop_sql(name))
            _run(raw, _drop_sql(text_index_name(*key)))
            changes.append(AnnChange(*key, action="dropped", rows=0))
    return changes


_FOLD = text(
    """
    UPDATE memories SET ann_deferred = false
    WHERE id IN (
      SELECT id FROM memories WHERE ann_deferred LIMIT :chunk FOR UPDATE SKIP LOCKED)
    """
)


def fold_ann_tails(engine: Engine, *, chunk: int = 500, budget_s: float = 30.0) -> int:
    """Let the ANN indexes take the rows written since: clear `ann_deferred`, a short
    transaction per `chunk` rows (each update is then one index insertion), until the
    tail is empty or `budget_s` is spent. Rows a batch holds locked are skipped; the
    next run takes them. Also clears the flag of a user whose index was dropped
    meanwhile: no index leaves their rows out any more. Returns the rows folded."""
    folded = 0
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        with engine.begin() as conn:
            done = conn.execute(_FOLD, {"chunk": chunk}).rowcount
        folded += done
        if done < chunk:
            break
    return folded


_REGISTERED = (
    "SELECT user_id, embedding_model, dims FROM memory_ann_indexes WHERE tenant = %(tenant)s"
)


class AnnRegistry:
    """Which users have an ANN index: one small query per tenant per `ttl_s` per process.

    Loaded per tenant because the query runs under row-level security: a tenant's
    session sees only its own rows, so one load cannot answer for another tenant.
    A stale entry is harmless both ways: a user not yet known gets the exact scan
    (correct, slower), and a dropped index is unregistered before it is dropped.
    """

    def __init__(self, ttl_s: float = 30.0) -> None:
        self.ttl_s = ttl_s
        # tenant -> (loaded at, {(user_id, model): dims})
        self._tenants: dict[str, tuple[float, dict[tuple[str, str], int]]] = {}

    async def dims_for(
        self, reads: TenantReadPool, tenant: str, user_id: str, model: str
    ) -> int | None:
        loaded_at, dims = self._tenants.get(tenant, (float("-inf"), {}))
        if time.monotonic() - loaded_at > self.ttl_s:
            rows = await reads.fetch_all(tenant, [(_REGISTERED, {"tenant": tenant})])
            dims = {(r[0], r[1]): int(r[2]) for r in rows}
            self._tenants[tenant] = (time.monotonic(), dims)
        return dims.get((user_id, model))

    def invalidate(self) -> None:
        self._tenants.clear()


def drop_user_indexes(conn: Connection, *, tenant: str, user_id: str) -> int:
    """Unregister and drop every ANN and full-text index of one user (erasure: their
    names are derived from the user id, and their predicates spell it out). `conn`
    must be in autocommit, as the connecting role, and its caller must hold no lock on
    `memories` (DROP INDEX CONCURRENTLY waits for every transaction that does).
    Returns the registrations dropped (one per embedding model: an HNSW index and its
    full-text twin)."""
    dropped = conn.execute(
        text(
            "DELETE FROM memory_ann_indexes WHERE tenant = :t AND user_id = :u "
            "RETURNING embedding_model, index_name"
        ),
        {"t": tenant, "u": user_id},
    ).all()  # fmt: skip
    raw = conn.connection.dbapi_connection
    assert raw is not None
    for model, name in dropped:
        _run(raw, _drop_sql(name))
        _run(raw, _drop_sql(text_index_name(tenant, user_id, model)))
    return len(dropped)


def build_user_index(
    conn: Connection, *, tenant: str, user_id: str, model: str, dims: int, rows: int
) -> None:
    """Build and register one user's ANN and full-text indexes for `model` now, even
    before any of their rows carry it (a re-embed builds the target's index before the
    user switches; the switch's update then fills it). `conn` must be in autocommit."""
    before = conn.execute(
        text(
            "SELECT index_name FROM memory_ann_indexes "
            "WHERE tenant = :t AND user_id = :u AND embedding_model = :m"
        ),
        {"t": tenant, "u": user_id, "m": model},
    ).scalar()
    _build(conn, (tenant, user_id, model), dims, rows, replacing=before)
