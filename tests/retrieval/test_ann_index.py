"""The per-user ANN index: made above the threshold, used by the query, dropped below."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np
from sqlalchemy import Engine, create_engine, delete, pool, text
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.driver import fetch_all
from memwell.db.models import Memory
from memwell.db.read_pool import TenantReadPool
from memwell.retrieval.ann import index_name, maintain_ann_indexes, text_index_name
from memwell.retrieval.search import (
    ANN_TERM_CAP_PER_CANDIDATE,
    MemoryHit,
    SearchParams,
    _bind,
    search_pooled,
    search_sync,
)
from tests.support.memory_factory import DIMS, MODEL, NOW, add_memory, search_params

ROWS = 240


def _engine(db: sessionmaker[Session]) -> Engine:
    bind = db.kw["bind"]
    return create_engine(bind.url, poolclass=pool.NullPool)


def _search_pooled(database_url: str, params: SearchParams) -> list[MemoryHit]:
    async def run() -> list[MemoryHit]:
        reads = TenantReadPool(database_url, max_size=1)
        await reads.open()
        try:
            return await search_pooled(reads, params)
        finally:
            await reads.close()

    return asyncio.run(run())


def test_ann_index_lifecycle_and_plan(
    db: sessionmaker[Session], database_url: str, ids: dict[str, str]
) -> None:
    t, u = ids["tenant"], ids["user"]
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((ROWS, DIMS)).astype(np.float32)
    with db.begin() as s:
        for i, v in enumerate(vectors):
            add_memory(s, tenant=t, user_id=u, content=f"row {i}", embedding=v)
        add_memory(s, tenant=t, user_id="small", content="tiny", embedding=vectors[0])
    engine = _engine(db)
    try:
        changes = maintain_ann_indexes(engine, threshold=ROWS)
        mine = [c for c in changes if c.tenant == t]
        assert [(c.user_id, c.action) for c in mine] == [(u, "created")]
        assert maintain_ann_indexes(engine, threshold=ROWS) == [] or all(
            c.tenant != t for c in maintain_ann_indexes(engine, threshold=ROWS)
        )  # idempotent for this user

        query = vectors[5] / np.linalg.norm(vectors[5])
        params = search_params(
            tenant=t, user_id=u, query_vector=query, embedding_model=MODEL, k=5,
            similarity_floor=-1.0, now=NOW, ann_dims=DIMS, ann_k=50,
        )  # fmt: skip
        sql, binds = _bind(replace(params, **{"query_text": "row"}))
        with engine.connect() as conn:
            # Tiny table: turn the alternatives off to prove the index is usable.
            conn.execute(text("SET enable_seqscan = off"))
            conn.execute(text("SET enable_bitmapscan = off"))
            conn.execute(text("SET enable_sort = off"))
            conn.execute(text("ANALYZE memories"))  # the user's real row count, not a guess
            plan = "\n".join(r[0] for r in fetch_all(conn, "EXPLAIN " + sql, binds))
            assert index_name(t, u, MODEL) in plan, plan
            # Full-text candidates come from the user's own GIN index: the function's
            # statement, with literals, matches that index's predicate.
            conn.execute(text("SET enable_bitmapscan = on"))
            conn.execute(text("SET enable_sort = on"))
            conn.execute(text("SET enable_indexscan = off"))
            literal = (
                f"EXPLAIN SELECT x.id FROM memories x WHERE x.tenant = '{t}' AND"
                f" x.user_id = '{u}' AND x.embedding_model = '{MODEL}'"
                " AND x.fts @@ CAST('row' AS tsquery) LIMIT 250"
            )
            text_plan = "\n".join(r[0] for r in conn.execute(text(literal)))
        assert text_index_name(t, u, MODEL) in text_plan, text_plan

        with db() as s:
            ann_hits = search_sync(s, params)
            exact_hits = search_sync(s, replace(params, **{"ann_dims": None}))
        assert ann_hits[0].content == "row 5"
        assert [h.id for h in ann_hits] == [h.id for h in exact_hits]
        # The request path's pooled search sends the ANN settings in the same pipeline.
        assert [h.id for h in _search_pooled(database_url, params)] == [h.id for h in ann_hits]

        with db.begin() as s:
            s.execute(
                delete(Memory).where(
                    Memory.tenant == t, Memory.user_id == u, Memory.content != "row 1"
                )
            )
        dropped = [c for c in maintain_ann_indexes(engine, threshold=ROWS) if c.tenant == t]
        assert [(c.user_id, c.action) for c in dropped] == [(u, "dropped")]
        with engine.connect() as conn:
            left = conn.execute(
                text("SELECT count(*) FROM pg_indexes WHERE indexname IN (:n, :f)"),
                {"n": index_name(t, u, MODEL), "f": text_index_name(t, u, MODEL)},
            ).scalar_one()
        assert left == 0
    finally:
        engine.dispose()


def test_ann_text_candidates_keep_every_match_of_a_rare_term(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    """Each query term contributes at most a capped number of rows to the ANN path's
    full-text candidates: a common word cannot crowd out the one row with a rare word."""
    t, u = ids["tenant"], ids["user"]
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((ROWS, DIMS)).astype(np.float32)
    with db.begin() as s:
        for i, v in enumerate(vectors):
            add_memory(s, tenant=t, user_id=u, content=f"row {i} notes", embedding=v)
        rare = add_memory(s, tenant=t, user_id=u, content="a zebra row", embedding=-vectors[0])
    engine = _engine(db)
    try:
        maintain_ann_indexes(engine, threshold=ROWS)
        params = search_params(
            tenant=t, user_id=u, query_vector=vectors[0], embedding_model=MODEL, k=3,
            similarity_floor=-1.0, now=NOW, ann_dims=DIMS, ann_k=5, fusion="score",
            text_weight=1.0, w_importance=0.0, w_recency=0.0,
            # a quote and a backslash: each term is quoted into its own tsquery
            query_text="notes on a zebra row? O'Brien\\path",
        )  # fmt: skip
        assert params.ann_k * ANN_TERM_CAP_PER_CANDIDATE < ROWS  # "row" overflows its cap
        with db() as s:
            hits = search_sync(s, params)
        # The vector half cannot find it (it points away from the query); the text half
        # must, although "row" and "notes" match every other row too.
        assert hits[0].id == rare
    finally:
        with db.begin() as s:
            s.execute(delete(Memory).where(Memory.tenant == t, Memory.user_id == u))
        maintain_ann_indexes(engine, threshold=ROWS)  # drops this user's indexes
        engine.dispose()


def test_text_candidates_answer_only_for_the_sessions_tenant(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    """The lookup runs as the table's owner (row-level security would forbid its index),
    so it keeps the isolation itself: as `memwell_app`, it answers for the session's
    tenant and for no other."""
    t, u = ids["tenant"], ids["user"]
    with db.begin() as s:
        add_memory(s, tenant=t, user_id=u, content="a zebra crossing", embedding=np.ones(DIMS))
    lookup = text(
        "SELECT count(*) FROM memwell_text_candidates(:t, :u, :m, 'zebra', 10)"
    ).bindparams(t=t, u=u, m=MODEL)
    enter = text(
        "SELECT set_config('role', 'memwell_app', true), set_config('memwell.tenant', :s, true)"
    )
    with db.begin() as s:
        s.execute(enter, {"s": t})
        assert s.execute(lookup).scalar_one() == 1
    with db.begin() as s:
        s.execute(enter, {"s": "another-tenant"})
        assert s.execute(lookup).scalar_one() == 0


def test_an_index_that_takes_every_new_row_is_rebuilt_to_leave_the_tail_out(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    """An index built before new rows could wait outside it (its predicate does not
    name `ann_deferred`) is replaced: built anew beside it, registered, then dropped."""
    t, u = ids["tenant"], ids["user"]
    rng = np.random.default_rng(11)
    with db.begin() as s:
        for i, v in enumerate(rng.standard_normal((ROWS, DIMS)).astype(np.float32)):
            add_memory(s, tenant=t, user_id=u, content=f"row {i}", embedding=v)
    legacy = "ix_ann_legacy_" + t.replace("-", "")[:20]
    engine = _engine(db)
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(
                text(
                    f'CREATE INDEX "{legacy}" ON memories USING hnsw '
                    f"((embedding::vector({DIMS})) vector_cosine_ops) "
                    f"WHERE tenant = '{t}' AND user_id = '{u}' AND embedding_model = '{MODEL}'"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO memory_ann_indexes (tenant, user_id, embedding_model, "
                    "index_name, dims, rows_at_build) VALUES (:t, :u, :m, :n, :d, :r)"
                ),
                {"t": t, "u": u, "m": MODEL, "n": legacy, "d": DIMS, "r": ROWS},
            )
        changes = [c for c in maintain_ann_indexes(engine, threshold=ROWS) if c.tenant == t]
        assert [(c.user_id, c.action) for c in changes] == [(u, "rebuilt")]
        with engine.connect() as conn:
            registered = conn.execute(
                text(
                    "SELECT index_name, defers_new_rows FROM memory_ann_indexes "
                    "WHERE tenant = :t AND user_id = :u"
                ),
                {"t": t, "u": u},
            ).one()
            definitions = dict(
                conn.execute(
                    text("SELECT indexname, indexdef FROM pg_indexes WHERE indexname IN (:a, :b)"),
                    {"a": legacy, "b": index_name(t, u, MODEL)},
                ).all()
            )
        assert tuple(registered) == (index_name(t, u, MODEL), True)
        assert list(definitions) == [index_name(t, u, MODEL)]
        assert "NOT ann_deferred" in definitions[index_name(t, u, MODEL)]
    finally:
        with db.begin() as s:
            s.execute(delete(Memory).where(Memory.tenant == t, Memory.user_id == u))
        maintain_ann_indexes(engine, threshold=ROWS)  # drops this user's indexes
        engine.dispose()
