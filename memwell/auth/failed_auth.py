"""A rate limit on failed authentication, per client address.

Every request without a valid key costs a Redis round trip and, for a key that looks
real, a Postgres lookup; a flood of wrong keys must not buy unlimited lookups, nor
unlimited guesses. Each client address has its own token bucket (the per-key limiter's
script, under its own key prefix): a failure takes a token, and an address with no
token left is answered 429 before its key is even looked up. Successful requests
never touch it. Like the per-key limiter it fails open while Redis is down.

A refusal is remembered in the process until its Retry-After passes, so a flood from
a refused address costs no Redis round trip per connection, only the header parse.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memwell.auth.key_cache import KeyCache, verify_key
from memwell.auth.keys import Principal
from memwell.auth.rate_limit import RateDecision, RateLimiter
from memwell.core.errors import RateLimited

BUCKET_PREFIX: Final = "authfail:"
MAX_REMEMBERED: Final = 10_000


class FailedAuthLimiter:
    def __init__(
        self, limiter: RateLimiter, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limiter = limiter
        self._clock = clock
        # address -> until when it is refused, oldest first
        self._refused: OrderedDict[str, float] = OrderedDict()

    async def blocked(self, address: str) -> RateDecision | None:
        """The refusal for `address` if it has used up its failures, else None."""
        until = self._refused.get(address)
        now = self._clock()
        if until is not None and now < until:
            wait = max(1, math.ceil(until - now))
            return RateDecision(allowed=False, retry_after_s=wait, remaining=0)
        decision = await self.limiter.peek(BUCKET_PREFIX + address)
        if decision.allowed:
            self._refused.pop(address, None)
            return None
        self._refused[address] = now + decision.retry_after_s
        self._refused.move_to_end(address)
        while len(self._refused) > MAX_REMEMBERED:
            self._refused.popitem(last=False)
        return decision

    async def failed(self, address: str) -> None:
        """Charge one failed attempt to `address`."""
        await self.limiter.hit(BUCKET_PREFIX + address)


async def verify_or_charge(
    cache: KeyCache,
    sessions: async_sessionmaker[AsyncSession],
    key: str | None,
    *,
    address: str,
    failures: FailedAuthLimiter | None,
) -> Principal | None:
    """The principal of `key` (None: no key, or unknown or revoked), with the failure
    charged to `address`; raises RateLimited while `address` has none left.

    A key this process has verified before is looked up even so: a client sharing an
    address (a NAT) with a flood keeps working; guesses do not."""
    principal = cache.get(key) if key else None
    if principal is not None:
        return principal
    if failures is not None and not (key and cache.seen(key)):
        blocked = await failures.blocked(address)
        if blocked is not None:
            raise RateLimited(
                "too many failed authentications from this address",
                retry_after_s=blocked.retry_after_s,
            )
    if key:
        principal = await verify_key(cache, sessions, key)
    if principal is None and failures is not None:
        await failures.failed(address)
    return principal
