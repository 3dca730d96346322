"""The request path's Redis client: a pool that waits for a free connection, and
that survives a Redis restart.

redis-py's default async pool caps connections at 100 and raises `Too many
connections` past that. Under 200 concurrent chat requests (figure 2 of the bench),
the buffer read, the buffer append and the access RPUSH of every request in flight
share it, and the overflow turned into HTTP 500s. A blocking pool makes a burst wait
its turn instead, for at most `wait_s`.

After a restart every pooled connection is stale. Each command is retried once on a
connection or timeout error (the retry reconnects), and a connection idle for longer
than `HEALTH_CHECK_S` is pinged before use, so the first request after the restart
succeeds instead of failing on a dead socket. Bounded socket timeouts make an
unreachable Redis an error (answered 503) within seconds, not a hung request.

A `sentinel://` URL (memwell/core/redis_target.py) gives a client of the primary that
Sentinel names: each new connection asks the sentinels, so the retry after a failover
reconnects to the new primary. Its pool is redis-py's sentinel pool, which does not
queue callers; its cap is raised instead, to the blocking pool's cap times ten.
"""

from __future__ import annotations

from typing import Any, cast

import redis
import redis.asyncio as aioredis
import redis.asyncio.sentinel as aiosentinel
import redis.sentinel
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError, TimeoutError
from redis.retry import Retry as SyncRetry

from memwell.core.redis_target import is_sentinel, parse_sentinel

HEALTH_CHECK_S = 15
CONNECT_TIMEOUT_S = 2.0
SOCKET_TIMEOUT_S = 5.0


def async_client(url: str, *, max_connections: int = 100, wait_s: float = 10.0) -> aioredis.Redis:
    """An asyncio Redis client whose pool queues callers when every connection is busy,
    and whose commands retry a stale connection once."""
    if is_sentinel(url):
        target = parse_sentinel(url)
        sentinel = aiosentinel.Sentinel(  # type: ignore[no-untyped-call]
            list(target.sentinels),
            sentinel_kwargs={**target.sentinel_kwargs(), **_TIMEOUTS},
            **_TIMEOUTS,
        )
        return cast(
            aioredis.Redis,
            sentinel.master_for(
                target.master_name,
                db=target.db,
                password=target.password,
                max_connections=max_connections * 10,
                retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=1),
                retry_on_error=[ConnectionError, TimeoutError],
                health_check_interval=HEALTH_CHECK_S,
            ),
        )
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=wait_s,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=1),
        retry_on_error=[ConnectionError, TimeoutError],
        health_check_interval=HEALTH_CHECK_S,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=SOCKET_TIMEOUT_S,
    )
    return aioredis.Redis.from_pool(pool)  # owns the pool: aclose() closes it too


_TIMEOUTS: dict[str, Any] = {
    "socket_connect_timeout": CONNECT_TIMEOUT_S,
    "socket_timeout": SOCKET_TIMEOUT_S,
}


def sync_client(url: str, **options: Any) -> redis.Redis:
    """A synchronous client of `url` (a plain Redis or the primary Sentinel names);
    `options` are redis-py connection options, such as timeouts."""
    if not is_sentinel(url):
        return redis.Redis.from_url(url, **options)
    target = parse_sentinel(url)
    timeouts = {**_TIMEOUTS, **{k: v for k, v in options.items() if k in _TIMEOUTS}}
    sentinel = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        list(target.sentinels), sentinel_kwargs={**target.sentinel_kwargs(), **timeouts}
    )
    options.setdefault("retry", SyncRetry(ExponentialBackoff(cap=0.5, base=0.05), retries=2))
    options.setdefault("retry_on_error", [ConnectionError, TimeoutError])
    client = sentinel.master_for(  # type: ignore[no-untyped-call]
        target.master_name, db=target.db, password=target.password, **{**timeouts, **options}
    )
    return cast(redis.Redis, client)
