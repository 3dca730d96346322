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
"""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError, TimeoutError

HEALTH_CHECK_S = 15
CONNECT_TIMEOUT_S = 2.0
SOCKET_TIMEOUT_S = 5.0


def async_client(url: str, *, max_connections: int = 100, wait_s: float = 10.0) -> aioredis.Redis:
    """An asyncio Redis client whose pool queues callers when every connection is busy,
    and whose commands retry a stale connection once."""
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
