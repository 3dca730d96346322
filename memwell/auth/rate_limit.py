"""A rate limit per API key: a token bucket in Redis, checked in one round trip.

The bucket refills at `rate` tokens per second up to `burst`; each request costs one.
The whole read-refill-take-write step is one Lua script (`rate_limit.lua`), so
concurrent API processes never race on a bucket, and its clock is Redis's own.

Without Redis the limiter fails open: the request goes on unmetered (and a warning is
logged). The limit protects capacity, not data (keys and row-level security do that),
and failing closed would turn a Redis outage into an outage of the routes that need
only Postgres (listing and searching memories).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from importlib import resources
from typing import Final

import redis.asyncio
import redis.exceptions

LIMIT_SCRIPT: Final = resources.files("memwell.auth").joinpath("rate_limit.lua").read_text("utf-8")
KEY_PREFIX: Final = "mw:rl:"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    retry_after_s: int  # whole seconds, rounded up, for the Retry-After header
    remaining: int


class RateLimiter:
    """Token buckets keyed by caller (an API key id)."""

    def __init__(self, client: redis.asyncio.Redis, *, rate_per_s: float, burst: int) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError("rate_per_s must be > 0 and burst >= 1")
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._script = client.register_script(LIMIT_SCRIPT)

    async def peek(self, bucket: str) -> RateDecision:
        """Whether `bucket` holds a whole token, taking none; allowed when Redis is down."""
        decision = await self.hit(bucket, cost=0)
        if decision.remaining >= 1:
            return decision
        return RateDecision(
            allowed=False, retry_after_s=max(1, math.ceil(1 / self.rate_per_s)), remaining=0
        )

    async def hit(self, bucket: str, *, cost: int = 1) -> RateDecision:
        """Take `cost` tokens from `bucket` if it has them; allowed when Redis is down."""
        try:
            allowed, wait_ms, remaining = await self._script(
                keys=[KEY_PREFIX + bucket], args=[self.rate_per_s, self.burst, cost]
            )
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            log.warning("rate limit not checked, Redis is unavailable: %s", exc)
            return RateDecision(allowed=True, retry_after_s=0, remaining=self.burst)
        return RateDecision(
            allowed=bool(allowed),
            retry_after_s=max(1, math.ceil(int(wait_ms) / 1000)) if not allowed else 0,
            remaining=int(remaining),
        )
