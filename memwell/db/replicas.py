"""The read pool on streaming replicas (MEMWELL_DATABASE_READ_URL), the primary behind.

Searches, context assembly and the lookups they make first (the user's ANN index,
their re-embed route) only read, so they can run on a hot standby that replays the
primary's WAL. Writes never come here: the API's sessions, the workers and the
re-embed all use DATABASE_URL.

- Replicas take turns, one read each.
- A replica that fails a read (down, unreachable, or a query cancelled by recovery)
  is set aside, and the read runs on the primary at once: a replica outage costs one
  read's detour, never an error. The background loop below probes it every few
  seconds and takes it back once it answers, so no request waits on a dead replica
  (a process without the loop, such as the CLI, retries it after `RETRY_S`).
- Read-your-writes: inside `reads_on_primary()` every read goes to the primary. The
  API enters it for a user who wrote a memory within MEMWELL_READ_YOUR_WRITES_S
  (memwell/db/recent_writes.py), so the search after an add finds it while the
  replica may still be replaying.
- A background loop publishes each replica's lag as `memwell_replica_lag_seconds`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

import sqlalchemy.exc
from psycopg import OperationalError
from psycopg_pool import PoolTimeout
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memwell.core.metrics import REPLICA_FALLBACKS_TOTAL, REPLICA_LAG_SECONDS
from memwell.core.redaction import describe
from memwell.db.driver import Row
from memwell.db.read_pool import Statement, TenantReadPool

log = logging.getLogger(__name__)
T = TypeVar("T")

#: How long a replica that failed is left alone before it is tried again.
RETRY_S = 5.0
#: A replica gets this long to hand out a connection before the primary serves.
REPLICA_TIMEOUT_S = 2.0
LAG_EVERY_S = 5.0

# Seconds behind the primary: 0 when everything received has been replayed (an idle
# primary sends nothing, and the last replay's age would grow without any lag).
LAG_SQL = (
    "SELECT CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0"
    " ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), 0)"
    " END::float8 AS lag"
)

_ON_PRIMARY: ContextVar[bool] = ContextVar("memwell_reads_on_primary", default=False)


@contextlib.contextmanager
def reads_on_primary(enabled: bool = True) -> Iterator[None]:
    """Within this block (this task and what it awaits), reads use the primary."""
    token = _ON_PRIMARY.set(enabled or _ON_PRIMARY.get())
    try:
        yield
    finally:
        _ON_PRIMARY.reset(token)


@dataclass
class _Replica:
    index: int
    pool: TenantReadPool
    down: bool = False
    down_until: float = 0.0


class RoutedReadPool(TenantReadPool):
    """A `TenantReadPool` on the primary whose reads go to replicas when it may."""

    def __init__(
        self, database_url: str, replica_urls: Sequence[str], *, max_size: int = 10
    ) -> None:
        super().__init__(database_url, max_size=max_size)
        self._replicas = [
            _Replica(
                i,
                TenantReadPool(
                    url, max_size=max_size, timeout_s=REPLICA_TIMEOUT_S, name=f"memwell-replica-{i}"
                ),
            )
            for i, url in enumerate(replica_urls)
        ]
        self._turn = 0
        self._lag_task: asyncio.Task[None] | None = None

    async def open(self, *, wait: bool = True) -> None:
        await super().open(wait=wait)
        for replica in self._replicas:
            # Not waited for: a replica down at startup must not stop the API.
            await replica.pool.open(wait=False)
        if self._lag_task is None:
            self._lag_task = asyncio.get_running_loop().create_task(self._lag_loop())

    async def close(self) -> None:
        if self._lag_task is not None:
            self._lag_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lag_task
            self._lag_task = None
        for replica in self._replicas:
            await replica.pool.close()
        await super().close()

    async def fetch_all(self, tenant: str, statements: Sequence[Statement]) -> list[Row]:
        if not _ON_PRIMARY.get():
            for replica in self._in_turn():
                try:
                    return await replica.pool.fetch_all(tenant, statements)
                except (OperationalError, PoolTimeout) as exc:
                    self._fail(replica, exc)
        return await super().fetch_all(tenant, statements)

    def _in_turn(self) -> list[_Replica]:
        """The replicas in service, starting with the next in turn."""
        now = time.monotonic()
        self._turn += 1
        n = len(self._replicas)
        ordered = [self._replicas[(self._turn + k) % n] for k in range(n)]
        if self._lag_task is not None:  # the loop's probe brings a failed one back
            return [r for r in ordered if not r.down]
        return [r for r in ordered if not r.down or r.down_until <= now]

    def _fail(self, replica: _Replica, exc: BaseException) -> None:
        replica.down, replica.down_until = True, time.monotonic() + RETRY_S
        REPLICA_FALLBACKS_TOTAL.labels(replica=str(replica.index)).inc()
        REPLICA_LAG_SECONDS.labels(replica=str(replica.index)).set(-1)
        log.warning(
            "read replica %d failed (%s); the primary serves its reads until it answers",
            replica.index,
            describe(exc),
        )

    async def replica_lags(self) -> dict[int, float | None]:
        """Each replica's lag in seconds (None: it did not answer); also published."""
        lags: dict[int, float | None] = {}
        for replica in self._replicas:
            try:
                rows = await replica.pool.fetch_all("", [(LAG_SQL, {})])
                lags[replica.index] = float(rows[0][0])
                if replica.down:
                    log.info("read replica %d answers again", replica.index)
                replica.down = False
            except (OperationalError, PoolTimeout):
                lags[replica.index] = None
                replica.down = True
            gauge = REPLICA_LAG_SECONDS.labels(replica=str(replica.index))
            gauge.set(-1 if lags[replica.index] is None else float(lags[replica.index] or 0))
        return lags

    async def _lag_loop(self) -> None:
        while True:
            try:
                await self.replica_lags()
            except Exception as exc:  # never let the gauge's loop die quietly
                log.warning("replica lag check failed: %s", describe(exc))
            await asyncio.sleep(LAG_EVERY_S)


async def read_session(
    replica: async_sessionmaker[AsyncSession] | None,
    primary: async_sessionmaker[AsyncSession],
    work: Callable[[AsyncSession], Awaitable[T]],
) -> T:
    """`work` in a session on the replica (the first of MEMWELL_DATABASE_READ_URL), or
    on the primary: without a replica, inside `reads_on_primary()`, or when the replica
    fails (then `work` runs again on the primary: it only reads)."""
    if replica is not None and not _ON_PRIMARY.get():
        try:
            async with replica() as session:
                return await work(session)
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError) as exc:
            REPLICA_FALLBACKS_TOTAL.labels(replica="0").inc()
            log.warning("read replica 0 failed (%s); this read ran on the primary", describe(exc))
    async with primary() as session:
        return await work(session)


def read_pool(database_url: str, replica_urls: Sequence[str]) -> TenantReadPool:
    """The request path's read pool: routed when there are replicas."""
    if not replica_urls:
        return TenantReadPool(database_url)
    return RoutedReadPool(database_url, replica_urls)
