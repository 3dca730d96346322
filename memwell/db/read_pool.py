"""A psycopg pool for the request path's tenant-scoped reads: one round trip per search,
and for a connection that last served the same tenant, one statement.

Why not the SQLAlchemy session: a search through it took a pool checkout with its
pre-ping, the transaction's BEGIN, the tenant's `set_config`, the statement and the
ROLLBACK on release, each a round trip of its own plus the ORM's bookkeeping (about
0.9 ms of a 2.2 ms search measured in one process; more in the API, where the event
loop also serves everything else).

Every connection of the pool runs as `memwell_app`, read-only, from the moment it is
made (`_configure`: the role and `default_transaction_read_only` for the session), so
row-level security binds every statement on it and none can write. It also carries the
tenant of the last read it served (`memwell.tenant`, for the session): a read for the
same tenant is the statement alone, a read for another sends the new tenant and the
statement together in pipeline mode, one round trip, and the connection is recorded as
that tenant's only once both succeeded. A read that fails in any way closes its
connection, so one whose tenant is in doubt is never used again. Measured on the LoCoMo
store, the statement alone against the same with its settings pipelined per search:
client CPU 572 against 909 µs, wall 3.6 against 4.3 ms; the pipeline machinery of an
async psycopg connection costs more than the statement's own round trip.

Settings a statement needs for itself (the ANN path's `hnsw.ef_search`) are local to
the pipeline's one implicit transaction (everything before a Sync is one), so they hold
for the statement and end with it.

Nothing ends in a ROLLBACK, which matters: psycopg forgets every statement it prepared
on a connection when it sees one, so each search would parse and plan its statement
again (a millisecond for the retrieval statement).

No check of the connection the pool hands out (an empty query, a round trip of its
own before every search): a connection the server closed while it idled (a restart,
an idle timeout) fails its read instead, the pool's idle connections are checked
then, and the statements run once more on a live one. They only read, so running them
twice changes nothing.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import AsyncConnection, OperationalError
from psycopg_pool import AsyncConnectionPool

from memwell.db.driver import Row, fetch_vector_oid, libpq_url, vector_cursor
from memwell.db.tenancy import TENANT_ROLE

# For the session: every later transaction of the connection runs as the tenant role,
# read-only.
_SESSION = (
    "SELECT set_config('role', %(role)s, false) AS role,"
    " set_config('default_transaction_read_only', 'on', false) AS read_only"
)
# The tenant of the connection's reads from now on, for the session.
_TENANT = "SELECT set_config('memwell.tenant', %(tenant)s, false) AS tenant"

Statement = tuple[str, Mapping[str, Any]]


class TenantReadPool:
    """Read-only statements for one tenant at a time, as the tenant role, on pooled
    connections that remember the tenant they last served."""

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
            # No transaction of psycopg's own: each statement, or pipeline, is one.
            kwargs={"autocommit": True, "connect_timeout": max(1, round(timeout_s))},
            configure=_configure,
            timeout=timeout_s,
            name=name,
        )
        self._vector_oid: int | None = None
        #: the tenant each live connection last served (none yet: not in here)
        self._tenants: weakref.WeakKeyDictionary[AsyncConnection[Any], str] = (
            weakref.WeakKeyDictionary()
        )

    async def open(self, *, wait: bool = True) -> None:
        await self._pool.open(wait=wait)

    async def close(self) -> None:
        await self._pool.close()

    async def fetch_all(self, tenant: str, statements: Sequence[Statement]) -> list[Row]:
        """Run `statements` in one transaction as `tenant`; the rows of the last one.

        Every statement but the last is a setting local to the transaction (its rows
        are discarded). The transaction is read-only: nothing here writes.
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
                if not settings and self._tenants.get(conn) == tenant:
                    async with vector_cursor(conn, oid) as cursor:
                        await cursor.execute(sql, binds, prepare=True, binary=True)
                        return list(await cursor.fetchall())
                async with conn.pipeline():
                    if self._tenants.get(conn) != tenant:
                        self._tenants.pop(conn, None)
                        await conn.execute(_TENANT, {"tenant": tenant}, prepare=True)
                    for setting, values in settings:
                        await conn.execute(setting, values, prepare=True)
                    # A cursor of its own: a cursor that ran several statements can
                    # hand back an earlier one's rows if those arrived first.
                    async with vector_cursor(conn, oid) as cursor:
                        await cursor.execute(sql, binds, prepare=True, binary=True)
                        rows = list(await cursor.fetchall())
                self._tenants[conn] = tenant
                return rows
            except BaseException as exc:
                self._tenants.pop(conn, None)
                lost = _lost(conn, exc)
                # After an error the server skipped the rest of the pipeline, PREPAREs
                # included, so psycopg's record of what this connection has prepared
                # may no longer match the server's (a later search once ran another
                # statement under its name). The pool replaces a closed connection.
                await conn.close()
                if lost is not None:
                    raise lost from exc
                raise


async def _configure(conn: AsyncConnection[Any]) -> None:
    """A new connection of the pool: the tenant role and read-only, for its session."""
    await conn.execute(_SESSION, {"role": TENANT_ROLE})


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
