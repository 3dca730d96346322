"""The request path's Redis client: a pool that waits for a free connection.

redis-py's default async pool caps connections at 100 and raises `Too many
connections` past that. Under 200 concurrent chat requests (figure 2 of the bench),
the buffer read, the buffer append and the access RPUSH of every request in flight
share it, and the overflow turned into HTTP 500s. A blocking pool makes a burst wait
its turn instead, for at most `wait_s`.
"""

from __future__ import annotations

import redis.asyncio as aioredis


def async_client(url: str, *, max_connections: int = 100, wait_s: float = 10.0) -> aioredis.Redis:
    """An asyncio Redis client whose pool queues callers when every connection is busy."""
    pool = aioredis.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=wait_s
    )
    return aioredis.Redis.from_pool(pool)  # owns the pool: aclose() closes it too
