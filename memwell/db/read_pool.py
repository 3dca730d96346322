"""A psycopg pool for the request path's tenant-scoped reads: one round trip per search.

Why not the SQLAlchemy session: a search through it took a pool checkout with its
pre-ping, the transaction's BEGIN, the tenant's `set_config`, the statement and the
ROLLBACK on release, each a round trip of its own plus the ORM's bookkeeping (about
0.9 ms of a 2.2 ms search measured in one process; more in the API, where the event
loop also serves everything else). Here the role, the tenant setting and the statement
go out together in pipeline mode, and come back in one round trip.

Why no BEGIN and COMMIT: everything a pipeline sends before its Sync runs as one
implicit transaction, so the settings, made local to the transaction, already hold for
the statement alone and end with it. The transaction is made read-only by a third
setting in the same call. An explicit BEGIN READ ONLY and COMMIT in the pipeline cost
two statements more, and on a busy 2-core host tripled the wall time of a trivial
search (1.0 ms against 0.31 ms for `SELECT 1`). Nothing ends in a ROLLBACK either,
which matters: psycopg forgets every statement it prepared on a connection when it
sees one, so each search would parse and plan its statement again (a millisecond for
the retrieval statement).

No check of the connection the pool hands out (an empty query, a round trip of its
own before every search): a connection the server closed while it idled (a restart,
an idle timeout) fails its pipeline instead, the pool's idle connections are checked
then, and the statements run once more on a live one. They only read (the
transaction is read-only), so running them twice changes nothing.

Row-level security still binds every statement: the transaction runs as `memwell_app`
for this tenant (`memwell/db/tenancy.py`), and the end of the transaction ends both
settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import AsyncConnection, OperationalError
from psycopg_pool import AsyncConnectionPool

from memwell.db.driver import Row, fetch_vector_oid, libpq_url, vector_cursor
from memwell.db.tenancy import TENANT_ROLE

_ENTER = (
    "SELECT set_config('role', %(role)s, true) AS role,"
    " set_config('memwell.tenant', %(tenant)s, true) AS tenant,"
    " set_config('transaction_read_only', 'on', true) AS read_only"
)

Statement = tuple[str, Mapping[str, Any]]


class TenantReadPool:
    """Read-only statements for one tenant at a time, pipelined, on pooled connections."""

    def __init__(
        self,
        database_url: str,
        *,
        max_size: int = 10,
        timeout_s: float = 30.0,
        name: str = "memwell-reads",
    ) -> None:
        self._pool = AsyncConnectionPool(
            libpq_url(database_url),
            min_size=1,
            max_size=max_size,
            open=False,
            # No transaction of psycopg's own: each pipeline is one (see the top).
            kwargs={"autocommit": True, "connect_timeout": max(1, round(timeout_s))},
            timeout=timeout_s,
            name=name,
        )
        self._vector_oid: int | None = None

    async def open(self, *, wait: bool = True) -> None:
        await self._pool.open(wait=wait)

    async def close(self) -> None:
        await self._pool.close()

    async def fetch_all(self, tenant: str, statements: Sequence[Statement]) -> list[Row]:
        """Run `statements` in one transaction as `tenant`; the rows of the last one.

        Every statement but the last is a setting (its rows are discarded). The
        transaction is read-only: nothing here writes.
        """
        if not statements:
            raise ValueError("no statement to run")
        if self._pool.closed:  # a process that skipped `open` at startup (MCP, CLI)
            await self._pool.open(wait=True)
        try:
            return await self._fetch(tenant, statements)
        except _ConnectionLost:
            pass
        # Every idle connection may be as dead as this one was (a server restart):
        # replace those, then run once more; a second loss is the server's answer.
        await self._pool.check()
        try:
            return await self._fetch(tenant, statements)
        except _ConnectionLost as lost:
            raise lost.error from None

    async def _fetch(self, tenant: str, statements: Sequence[Statement]) -> list[Row]:
        *settings, (sql, binds) = statements
        async with self._pool.connection() as conn:
            try:
                if self._vector_oid is None:
                    self._vector_oid = await fetch_vector_oid(conn)
                oid = self._vector_oid
                async with conn.pipeline():
                    enter = {"role": TENANT_ROLE, "tenant": tenant}
                    await conn.execute(_ENTER, enter, prepare=True)
                    for setting, values in settings:
                        await conn.execute(setting, values, prepare=True)
                    # A cursor of its own: a cursor that ran several statements can
                    # hand back an earlier one's rows if those arrived first.
                    async with vector_cursor(conn, oid) as cursor:
                        await cursor.execute(sql, binds, prepare=True, binary=True)
                        return list(await cursor.fetchall())
            except BaseException as exc:
                lost = _lost(conn, exc)
                # After an error the server skipped the rest of the pipeline, PREPAREs
                # included, so psycopg's record of what this connection has prepared
                # may no longer match the server's (a later search once ran another
                # statement under its name). The pool replaces a closed connection.
                await conn.close()
                if lost is not None:
                    raise lost from exc
                raise


class _ConnectionLost(Exception):
    """The connection died under the statements (never a statement's own error)."""

    def __init__(self, error: OperationalError) -> None:
        super().__init__(str(error))
        self.error = error


def _lost(conn: AsyncConnection[Any], exc: BaseException) -> _ConnectionLost | None:
    # `broken`: closed by the other end or the network, not by us (and never by a
    # statement's error or a cancellation, which leave the connection usable).
    if isinstance(exc, OperationalError) and conn.broken:
        return _ConnectionLost(exc)
    return None
