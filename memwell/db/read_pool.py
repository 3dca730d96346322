"""A psycopg pool for the request path's tenant-scoped reads: one round trip per search.

Why not the SQLAlchemy session: a search through it took a pool checkout with its
pre-ping, the transaction's BEGIN, the tenant's `set_config`, the statement and the
ROLLBACK on release, each a round trip of its own plus the ORM's bookkeeping (about
0.9 ms of a 2.2 ms search measured in one process; more in the API, where the event
loop also serves everything else). Here the role, the tenant setting and the statement
go out together in pipeline mode, between the BEGIN and the ROLLBACK that bound the
transaction, and come back in one round trip (the pool's check of the connection it
hands out is the only other one).

Row-level security still binds every statement: the transaction runs as `memwell_app`
for this tenant (`memwell/db/tenancy.py`), and the rollback ends both settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from psycopg_pool import AsyncConnectionPool

from memwell.db.driver import Row, fetch_vector_oid, libpq_url, vector_cursor
from memwell.db.tenancy import TENANT_ROLE

_ENTER = (
    "SELECT set_config('role', %(role)s, true) AS role,"
    " set_config('memwell.tenant', %(tenant)s, true) AS tenant"
)

Statement = tuple[str, Mapping[str, Any]]


class TenantReadPool:
    """Read-only statements for one tenant at a time, pipelined, on pooled connections."""

    def __init__(self, database_url: str, *, max_size: int = 10) -> None:
        self._pool = AsyncConnectionPool(
            libpq_url(database_url),
            min_size=1,
            max_size=max_size,
            open=False,
            # A cheap check (one empty query) that drops connections a restart of the
            # server closed, instead of failing the request that draws one.
            check=AsyncConnectionPool.check_connection,
            # Transactions are explicit below, so BEGIN and ROLLBACK join the pipeline.
            kwargs={"autocommit": True},
            name="memwell-reads",
        )
        self._vector_oid: int | None = None

    async def open(self) -> None:
        await self._pool.open(wait=True)

    async def close(self) -> None:
        await self._pool.close()

    async def fetch_all(self, tenant: str, statements: Sequence[Statement]) -> list[Row]:
        """Run `statements` in one transaction as `tenant`; the rows of the last one.

        Every statement but the last is a setting (its rows are discarded). The
        transaction is always rolled back: nothing here writes.
        """
        if not statements:
            raise ValueError("no statement to run")
        if self._pool.closed:  # a process that skipped `open` at startup (MCP, CLI)
            await self._pool.open(wait=True)
        async with self._pool.connection() as conn:
            if self._vector_oid is None:
                self._vector_oid = await fetch_vector_oid(conn)
            oid = self._vector_oid
            *settings, (sql, binds) = statements
            try:
                async with conn.pipeline():
                    await conn.execute("BEGIN")
                    enter = {"role": TENANT_ROLE, "tenant": tenant}
                    await conn.execute(_ENTER, enter, prepare=True)
                    for setting, values in settings:
                        await conn.execute(setting, values, prepare=True)
                    # A cursor of its own: a cursor that ran several statements can
                    # hand back an earlier one's rows if those arrived first.
                    async with vector_cursor(conn, oid) as cursor:
                        await cursor.execute(sql, binds, prepare=True, binary=True)
                        await conn.execute("ROLLBACK")
                        return list(await cursor.fetchall())
            except BaseException:
                # After an error the server skipped the rest of the pipeline, PREPAREs
                # included, so psycopg's record of what this connection has prepared
                # may no longer match the server's (a later search once ran another
                # statement under its name). The pool replaces a closed connection.
                await conn.close()
                raise
