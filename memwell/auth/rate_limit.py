"""A rate limit per API key: a token bucket in Redis, checked in one round trip.

The bucket refills at `rate` tokens per second up to `burst`; each request costs one.
The whole read-refill-take-write step is one Lua script (`rate_limit.lua`), so
concurrent API processes never race on a bucket, and its clock is Redis's own. With
`lease_s`, a busy key's process takes a few tokens per trip and spends them locally
(memwell/auth/token_lease.py), so most of its requests skip the round trip.

Without Redis the limiter fails open: the request goes on unmetered (and a warning is
logged). The limit protects capacity, not data (keys and row-level security do that),
and failing closed would turn a Redis outage into an outage of the routes that need
only Postgres (listing and searching memories).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Final

import redis.asyncio
import redis.exceptions

from memwell.auth.token_lease import TokenLeases

LIMIT_SCRIPT: Final = resources.files("memwell.auth").joinpath("rate_limit.lua").read_text("utf-8")
KEY_PREFIX: Final = "mw:rl:"
#: A lease never holds more: one process cannot sit on a large share of a bucket.
LEASE_MAX_TOKENS: Final = 64

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    retry_after_s: int  # whole seconds, rounded up, for the Retry-After header
    remaining: int


class RateLimiter:
    """Token buckets keyed by caller (an API key id)."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        *,
        rate_per_s: float,
        burst: int,
        lease_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`lease_s` > 0 lets one request's trip take tokens for the key's next requests
        on this process, spent within `lease_s`; at most what the bucket refills in that
        time, so slow limits (under two tokens a lease) are always asked for."""
        if rate_per_s <= 0 or burst < 1:
            raise ValueError("rate_per_s must be > 0 and burst >= 1")
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._script = client.register_script(LIMIT_SCRIPT)
        lease_tokens = min(LEASE_MAX_TOKENS, burst, math.floor(rate_per_s * lease_s))
        self._leases = (
            TokenLeases(period_s=lease_s, max_tokens=lease_tokens, clock=clock)
            if lease_tokens >= 2
            else None
        )

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
        leases = self._leases if cost == 1 else None
        if leases is not None and leases.take(bucket):
            return RateDecision(allowed=True, retry_after_s=0, remaining=leases.held(bucket))
        wanted = leases.wanted(bucket) if leases is not None else 0
        handed_back = leases.hand_back(bucket) if leases is not None else 0
        try:
            allowed, wait_ms, remaining, granted = await self._script(
                keys=[KEY_PREFIX + bucket],
                args=[self.rate_per_s, self.burst, cost, wanted, handed_back],
            )
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            log.warning("rate limit not checked, Redis is unavailable: %s", exc)
            return RateDecision(allowed=True, retry_after_s=0, remaining=self.burst)
        if leases is not None:
            leases.grant(bucket, int(granted))
        return RateDecision(
            allowed=bool(allowed),
            retry_after_s=max(1, math.ceil(int(wait_ms) / 1000)) if not allowed else 0,
            remaining=int(remaining) + int(granted),
        )
