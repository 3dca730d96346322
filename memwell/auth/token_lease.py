"""An API process's leases of tokens from the shared rate-limit buckets.

Each request of a busy key would otherwise pay a Redis round trip to its bucket, about
half a millisecond, a tenth of what a search itself costs. Instead a process takes a
few tokens in one trip and spends them locally for a short period. The bucket is
charged before the requests are served, so the limit still holds across processes; the
tokens a lease did not spend go back to the bucket with the process's next trip to it.

A lease follows the key's demand on this process: it takes as many tokens as the key
sent requests here in the last period, at most `max_tokens`. A key that calls now and
then takes one token per request, exactly as without leases, and an idle process holds
at most one lease's rest per key, for one period.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

#: Past this many keys, leases that ran out are forgotten (bounded memory per process).
_KEYS_KEPT: Final = 4096


@dataclass
class _Lease:
    tokens: int = 0
    expires: float = 0.0
    window_start: float = 0.0
    window_hits: int = 0
    #: the requests seen in the last whole period: the size of the next lease
    demand: int = 1


class TokenLeases:
    """The leases one process holds, by bucket. Not thread-safe: one event loop's."""

    def __init__(
        self,
        *,
        period_s: float,
        max_tokens: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if period_s <= 0 or max_tokens < 2:
            raise ValueError("a lease needs period_s > 0 and max_tokens >= 2")
        self.period_s = period_s
        self.max_tokens = max_tokens
        self._clock = clock
        self._leases: dict[str, _Lease] = {}

    def take(self, bucket: str) -> bool:
        """Spend one token of `bucket`'s lease; False when it has none left (or expired).
        Every call counts towards the key's demand."""
        now = self._clock()
        lease = self._leases.get(bucket)
        if lease is None:
            if len(self._leases) >= _KEYS_KEPT:
                self._forget_idle(now)
            lease = self._leases[bucket] = _Lease(window_start=now)
        if now - lease.window_start >= self.period_s:
            recent = now - lease.window_start < 2 * self.period_s
            lease.demand = max(1, lease.window_hits) if recent else 1
            lease.window_start, lease.window_hits = now, 0
        lease.window_hits += 1
        if lease.tokens >= 1 and now < lease.expires:
            lease.tokens -= 1
            return True
        return False

    def wanted(self, bucket: str) -> int:
        """Tokens to take beyond this request's own with the next trip to the bucket."""
        lease = self._leases.get(bucket)
        return 0 if lease is None else min(lease.demand, self.max_tokens) - 1

    def hand_back(self, bucket: str) -> int:
        """The unspent tokens of an expired lease, which leave it (to go back)."""
        lease = self._leases.get(bucket)
        if lease is None or lease.tokens <= 0 or self._clock() < lease.expires:
            return 0
        unspent, lease.tokens = lease.tokens, 0
        return unspent

    def grant(self, bucket: str, tokens: int) -> None:
        """`tokens` more for `bucket`'s lease, which runs for one period from now."""
        if tokens <= 0:
            return
        lease = self._leases.setdefault(bucket, _Lease(window_start=self._clock()))
        lease.tokens += tokens
        lease.expires = self._clock() + self.period_s

    def held(self, bucket: str) -> int:
        lease = self._leases.get(bucket)
        return 0 if lease is None else lease.tokens

    def _forget_idle(self, now: float) -> None:
        idle = [
            b
            for b, lease in self._leases.items()
            if now >= lease.expires and now - lease.window_start >= 2 * self.period_s
        ]
        for bucket in idle:
            del self._leases[bucket]
