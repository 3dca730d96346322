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


def test_the_role_and_tenant_end_with_the_search(database_url: str) -> None:
    """The settings are local to the pipeline's one implicit transaction: the next user
    of the pooled connection finds neither the role nor the tenant."""
    who = ("SELECT current_user AS u, current_setting('memwell.tenant', true) AS t", {})

    async def run() -> tuple[tuple[str, str], tuple[str, str]]:
        reads = TenantReadPool(database_url, max_size=1)
        await reads.open()
        try:
            inside = await reads.fetch_all("tenant-a", [who])
            async with reads._pool.connection() as conn:  # the same, only connection
                after = await (await conn.execute(who[0])).fetchall()
            return (str(inside[0][0]), str(inside[0][1])), (str(after[0][0]), str(after[0][1]))
        finally:
            await reads.close()

    inside, after = asyncio.run(run())
    assert inside == ("memwell_app", "tenant-a")
    assert after[0] != "memwell_app"
    assert after[1] == ""
