"""Row-level security is really enforced: a tenant-scoped session sees and changes
only its tenant's rows even when a query forgets its WHERE clause, and a session
that forgot to set a tenant sees nothing. (The service connects as the embedded
superuser, which bypasses RLS; these sessions switch to `memwell_app`.)"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import psycopg
import pytest
import sqlalchemy.exc
from sqlalchemy import Engine, create_engine, func, insert, pool, select, text, update
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import MemoryAnnIndex, Turn
from memwell.db.read_pool import TenantReadPool
from memwell.db.tenancy import (
    make_tenant_sessionmaker,
    tenant_transaction,
)
from memwell.retrieval.ann import AnnRegistry


@pytest.fixture(scope="module")
def engine(database_url: str) -> Engine:
    return create_engine(database_url, poolclass=pool.NullPool)


def _turn(tenant: str, turn_id: str, user: str) -> dict[str, object]:
    return {
        "tenant": tenant, "id": turn_id, "user_id": user, "session_id": "s", "role": "user",
        "content": f"secret of {tenant}", "created_at": datetime.now(UTC), "token_count": 3,
    }  # fmt: skip


@pytest.fixture
def two_tenants(db: sessionmaker[Session], ids: dict[str, str]) -> tuple[str, str]:
    a, b = ids["tenant"] + "-a", ids["tenant"] + "-b"
    with db.begin() as session:
        session.execute(
            insert(Turn), [_turn(a, "t1", "u"), _turn(a, "t2", "u"), _turn(b, "t1", "u")]
        )
    return a, b


def test_forgotten_where_clause_sees_only_own_tenant(
    engine: Engine, two_tenants: tuple[str, str]
) -> None:
    a, b = two_tenants
    maker = make_tenant_sessionmaker(engine)
    with tenant_transaction(maker, a) as session:
        # No tenant filter at all: the policy supplies it.
        tenants = set(session.scalars(select(Turn.tenant)).all())
        assert tenants == {a}
        assert session.scalar(text("SELECT current_user")) == "memwell_app"
    with tenant_transaction(maker, b) as session:
        contents = session.scalars(select(Turn.content)).all()
        assert contents == [f"secret of {b}"]


def test_session_without_tenant_sees_nothing(engine: Engine, two_tenants: tuple[str, str]) -> None:
    maker = make_tenant_sessionmaker(engine)
    with maker() as session:
        assert session.scalar(select(func.count()).select_from(Turn)) == 0


def test_cannot_change_or_create_rows_of_another_tenant(
    engine: Engine, db: sessionmaker[Session], two_tenants: tuple[str, str]
) -> None:
    a, b = two_tenants
    maker = make_tenant_sessionmaker(engine)
    with tenant_transaction(maker, a) as session:
        changed = session.execute(
            update(Turn).where(Turn.tenant == b).values(content="overwritten")
        ).rowcount
        assert changed == 0
    forbidden = pytest.raises(sqlalchemy.exc.ProgrammingError, match="row-level security")
    with forbidden, tenant_transaction(maker, a) as session:
        session.execute(insert(Turn), [_turn(b, "forged", "u")])
    with db() as session:
        assert session.scalar(select(Turn.content).where(Turn.tenant == b)) == f"secret of {b}"
        assert session.get(Turn, (b, "forged")) is None


ROLE_FLAGS = "SELECT rolsuper, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = %s"
OWNERS = "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'"


def test_app_role_is_not_privileged(engine: Engine) -> None:
    with engine.connect() as conn:
        row = conn.exec_driver_sql(ROLE_FLAGS, ("memwell_app",)).one()
        owners = set(conn.scalars(text(OWNERS)))
    assert tuple(row) == (False, False, False)
    assert "memwell_app" not in owners


def test_ann_registry_answers_for_every_tenant_under_rls(
    db: sessionmaker[Session], database_url: str, ids: dict[str, str]
) -> None:
    """The registry's query runs as a tenant and sees only that tenant's rows, so it
    must be loaded per tenant, not once for all."""
    a, b = ids["tenant"] + "-a", ids["tenant"] + "-b"
    with db.begin() as session:
        for tenant in (a, b):
            session.add(
                MemoryAnnIndex(
                    tenant=tenant, user_id="big", embedding_model="m", dims=384,
                    index_name=f"ix_{tenant}"[:63], rows_at_build=10_000,
                )
            )  # fmt: skip

    async def lookup() -> list[int | None]:
        reads = TenantReadPool(database_url, max_size=1)
        await reads.open()
        registry = AnnRegistry(ttl_s=60)
        try:
            return [await registry.dims_for(reads, t, "big", "m") for t in (a, b, a)]
        finally:
            await reads.close()

    assert asyncio.run(lookup()) == [384, 384, 384]


def test_read_pool_runs_as_the_tenant_and_keeps_only_the_last_one(
    database_url: str, two_tenants: tuple[str, str]
) -> None:
    """The request path's pooled reads: the tenant's rows only, as `memwell_app`, also
    on a connection that served another tenant or failed a read. A pooled connection
    runs as `memwell_app` throughout, and carries the tenant of the last read it served
    (the next read for it is then one statement), never a tenant in doubt."""
    a, b = two_tenants
    everything = ("SELECT tenant, current_user AS role FROM turns ORDER BY id", {})

    async def run() -> tuple[list[object], list[object], list[object], tuple[object, ...] | None]:
        reads = TenantReadPool(database_url, max_size=1)  # one connection: reused by all
        await reads.open()
        try:
            seen_a = await reads.fetch_all(a, [everything])
            with pytest.raises(psycopg.errors.UndefinedTable):
                await reads.fetch_all(a, [("SELECT * FROM no_such_table", {})])
            seen_b = await reads.fetch_all(b, [everything])
            again_a = await reads.fetch_all(a, [everything])
            # Straight on the pool's (only) connection, as the next read would get it.
            async with reads._pool.connection() as conn:
                cursor = await conn.execute(
                    "SELECT current_user = 'memwell_app',"
                    " coalesce(current_setting('memwell.tenant', true), '')"
                )
                left = await cursor.fetchone()
        finally:
            await reads.close()
        return seen_a, seen_b, again_a, left

    seen_a, seen_b, again_a, left = asyncio.run(run())
    assert [tuple(r) for r in seen_a] == [(a, "memwell_app"), (a, "memwell_app")]  # type: ignore[arg-type]
    assert [tuple(r) for r in seen_b] == [(b, "memwell_app")]  # type: ignore[arg-type]
    assert [tuple(r) for r in again_a] == [tuple(r) for r in seen_a]  # type: ignore[arg-type]
    assert left == (True, a)


def test_read_pool_returns_the_last_statements_rows(database_url: str) -> None:
    """Only the last statement's rows come back, never a setting's, also when the
    last one has none (a user without memories)."""
    setting = ("SELECT set_config('application_name', 'memwell-test', true) AS app", {})

    async def run() -> list[list[tuple[str, ...]]]:
        reads = TenantReadPool(database_url, max_size=1)
        await reads.open()
        try:
            out = []
            for i in range(100):
                rows = await reads.fetch_all("t", [setting, ("SELECT %(i)s::int AS i", {"i": i})])
                out.append([r._fields for r in rows])
                assert [r.i for r in rows] == [i]
            # No rows (a user without memories): none, not the settings' rows.
            assert await reads.fetch_all("t", [setting, ("SELECT 1 WHERE false", {})]) == []
            return out
        finally:
            await reads.close()

    assert all(fields == [("i",)] for fields in asyncio.run(run()))
