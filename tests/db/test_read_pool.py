"""The request path's read pool hands out connections unchecked: one the server closed
while it idled must cost a second attempt, never the request."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from memwell.db.driver import libpq_url
from memwell.db.read_pool import TenantReadPool

_PID = ("SELECT pg_backend_pid() AS pid", {})


def _terminate(database_url: str, pids: list[int]) -> None:
    """Close these backends from the server's side, as a restart would, and wait until
    they are gone."""
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])


@pytest.mark.parametrize("size", [1, 3])
def test_reads_survive_connections_the_server_closed(database_url: str, size: int) -> None:
    async def run() -> tuple[set[int], int]:
        reads = TenantReadPool(database_url, max_size=size)
        await reads.open()
        try:
            # Every connection of the pool in use at once, so all of them exist.
            rows = await asyncio.gather(*(reads.fetch_all("t", [_PID]) for _ in range(size)))
            before = {int(r[0][0]) for r in rows}
            await asyncio.to_thread(_terminate, database_url, list(before))
            after = await reads.fetch_all("t", [_PID])
            return before, int(after[0][0])
        finally:
            await reads.close()

    before, after = asyncio.run(run())
    assert after not in before


def test_a_statement_error_is_not_run_again(database_url: str) -> None:
    """Only a lost connection is retried: a statement's own error reaches the caller
    after one attempt."""
    attempts = 0

    async def run() -> None:
        nonlocal attempts
        reads = TenantReadPool(database_url, max_size=1)
        fetch = reads._fetch

        async def counted(*args: object) -> object:
            nonlocal attempts
            attempts += 1
            return await fetch(*args)  # type: ignore[arg-type]

        reads._fetch = counted  # type: ignore[method-assign]
        await reads.open()
        try:
            with pytest.raises(psycopg.errors.DivisionByZero):
                await reads.fetch_all("t", [("SELECT 1/0", {})])
        finally:
            await reads.close()

    asyncio.run(run())
    assert attempts == 1


def test_a_statement_stays_prepared_between_searches(database_url: str) -> None:
    """The transaction ends without a ROLLBACK, which would make psycopg forget (and
    the server parse and plan again) every statement the connection prepared."""
    search = ("SELECT count(*) AS n FROM pg_class WHERE relname <> %(name)s", {"name": "x"})
    prepared = ("SELECT statement AS s FROM pg_prepared_statements", {})

    async def run() -> list[str]:
        reads = TenantReadPool(database_url, max_size=1)
        await reads.open()
        try:
            for _ in range(3):  # psycopg prepares a statement on its second use
                await reads.fetch_all("t", [search])
            return [str(r[0]) for r in await reads.fetch_all("t", [prepared])]
        finally:
            await reads.close()

    statements = asyncio.run(run())
    assert any("relname <>" in s for s in statements), statements


def test_reads_cannot_write(database_url: str) -> None:
    async def run() -> None:
        reads = TenantReadPool(database_url, max_size=1)
        await reads.open()
        try:
            await reads.fetch_all("t", [("CREATE TEMP TABLE t_reads (x int)", {})])
        finally:
            await reads.close()

    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        asyncio.run(run())


_WHO = (
    "SELECT current_user AS u, current_setting('memwell.tenant', true) AS t,"
    " pg_backend_pid() AS pid",
    {},
)


def test_a_connection_serves_each_tenant_as_that_tenant(database_url: str) -> None:
    """One connection, reads for tenants a, b, a: each runs as the tenant role with its
    own tenant, whether the connection last served it or another one."""

    async def run() -> list[tuple[str, str, int]]:
        reads = TenantReadPool(database_url, max_size=1)
        await reads.open()
        try:
            seen = []
            for tenant in ("tenant-a", "tenant-a", "tenant-b", "tenant-a"):
                row = (await reads.fetch_all(tenant, [_WHO]))[0]
                seen.append((str(row[0]), str(row[1]), int(row[2])))
            return seen
        finally:
            await reads.close()

    seen = asyncio.run(run())
    assert [(u, t) for u, t, _ in seen] == [
        ("memwell_app", "tenant-a"),
        ("memwell_app", "tenant-a"),
        ("memwell_app", "tenant-b"),
        ("memwell_app", "tenant-a"),
    ]
    assert len({pid for *_, pid in seen}) == 1  # the same connection throughout


def test_a_failed_read_does_not_leave_its_connection_to_the_next(database_url: str) -> None:
    """A read that fails closes its connection: the next read, for another tenant, gets
    a fresh one, never one whose tenant setting is in doubt."""

    async def run() -> tuple[int, tuple[str, int]]:
        reads = TenantReadPool(database_url, max_size=1)
        await reads.open()
        try:
            first = int((await reads.fetch_all("tenant-a", [_WHO]))[0][2])
            with pytest.raises(psycopg.errors.DivisionByZero):
                await reads.fetch_all("tenant-b", [("SELECT 1 / 0 AS x", {})])
            row = (await reads.fetch_all("tenant-c", [_WHO]))[0]
            return first, (str(row[1]), int(row[2]))
        finally:
            await reads.close()

    first, (tenant, pid) = asyncio.run(run())
    assert tenant == "tenant-c"
    assert pid != first
