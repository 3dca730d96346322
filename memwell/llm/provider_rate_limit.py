"""A request rate limit on the model endpoint, shared by every worker through Redis.

A fixed one-minute window: each call INCRs the window's counter; over the limit, the
caller waits for the next window (up to `max_wait_s`, then raises RateLimited so
the task retries later with backoff instead of holding a worker forever).
"""

from __future__ import annotations

import time

import redis

KEY = "mw:llm:rate:"


class RateLimited(Exception):
    """The shared request budget stayed exhausted for longer than we may wait."""


class RedisRateLimiter:
    def __init__(self, client: redis.Redis, *, per_minute: int, max_wait_s: float) -> None:
        self._redis = client
        self.per_minute = per_minute
        self.max_wait_s = max_wait_s

    def acquire(self, *, max_wait_s: float | None = None) -> None:
        """Take one request from the shared budget, waiting for a window if needed (at
        most `max_wait_s`, default the limiter's own)."""
        if self.per_minute <= 0:
            return
        wait_s = self.max_wait_s if max_wait_s is None else min(self.max_wait_s, max_wait_s)
        deadline = time.monotonic() + wait_s
        while True:
            window = int(time.time() // 60)
            key = f"{KEY}{window}"
            with self._redis.pipeline() as pipe:
                pipe.incr(key)
                pipe.expire(key, 120)
                count = int(pipe.execute()[0])
            if count <= self.per_minute:
                return
            wait = (window + 1) * 60 - time.time() + 0.01
            if time.monotonic() + wait > deadline:
                raise RateLimited(f"over {self.per_minute} requests/minute")
            time.sleep(wait)
