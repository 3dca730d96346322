"""Leased rate-limit tokens: a busy key's requests skip the Redis trip, the limit holds
across processes, and unspent tokens go back to the bucket. Real Redis; the leases'
clock is the test's, so periods pass without waiting."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis.asyncio

from memwell.auth.rate_limit import KEY_PREFIX, RateLimiter
from memwell.auth.token_lease import TokenLeases
from tests.support.clock import FakeClock


def test_a_lease_follows_the_demand_of_the_last_period() -> None:
    clock = FakeClock()
    leases = TokenLeases(period_s=0.5, max_tokens=8, clock=clock)
    assert [leases.take("k") for _ in range(5)] == [False] * 5
    assert leases.wanted("k") == 0  # no whole period seen yet: one token at a time
    clock.now += 0.5
    assert leases.take("k") is False
    assert leases.wanted("k") == 4  # five requests last period: this one and four more
    leases.grant("k", 4)
    assert [leases.take("k") for _ in range(5)] == [True] * 4 + [False]
    clock.now += 10  # idle: the next lease is one token again
    leases.take("k")
    assert leases.wanted("k") == 0


def test_only_an_expired_lease_hands_its_tokens_back() -> None:
    clock = FakeClock()
    leases = TokenLeases(period_s=1.0, max_tokens=8, clock=clock)
    leases.grant("k", 3)
    assert leases.hand_back("k") == 0
    clock.now += 1.0
    assert leases.take("k") is False  # expired: not spent
    assert leases.hand_back("k") == 3
    assert leases.hand_back("k") == 0


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.asyncio.Redis]:
    yield redis.asyncio.Redis.from_url(redis_url)


def _counting(limiter: RateLimiter) -> list[int]:
    """Counts the limiter's trips to Redis."""
    trips: list[int] = []
    script: Callable[..., Awaitable[Any]] = limiter._script

    async def counted(**kwargs: Any) -> Any:
        trips.append(1)
        return await script(**kwargs)

    limiter._script = counted  # type: ignore[assignment]
    return trips


def test_a_busy_key_asks_redis_once_per_lease(client: redis.asyncio.Redis) -> None:
    async def run() -> tuple[int, int, list[bool]]:
        clock = FakeClock()
        limiter = RateLimiter(client, rate_per_s=100, burst=1000, lease_s=0.2, clock=clock)
        trips = _counting(limiter)
        bucket = f"lease-{uuid.uuid4()}"
        first = [(await limiter.hit(bucket)).allowed for _ in range(5)]
        before = len(trips)
        clock.now += 0.2
        second = [(await limiter.hit(bucket)).allowed for _ in range(20)]
        return before, len(trips) - before, first + second

    first_trips, second_trips, allowed = asyncio.run(run())
    assert all(allowed)
    assert first_trips == 5  # demand unknown: one trip per request
    assert second_trips == 4  # demand 5: each trip takes this request's token and 4 more


def test_unspent_tokens_go_back_to_the_bucket(client: redis.asyncio.Redis) -> None:
    async def run() -> tuple[float, float, int]:
        clock = FakeClock()
        limiter = RateLimiter(client, rate_per_s=10, burst=50, lease_s=1.0, clock=clock)
        bucket = f"lease-{uuid.uuid4()}"
        for _ in range(6):
            await limiter.hit(bucket)
        clock.now += 1.0
        await limiter.hit(bucket)  # takes its own token and 5 for the lease
        await limiter.hit(bucket)  # spends one of them: 4 left unspent
        held = float(await client.hget(KEY_PREFIX + bucket, "tokens") or 0)
        clock.now += 1.0  # the lease expires
        decision = await limiter.hit(bucket)  # hands 4 back, takes 1, leases again
        after = float(await client.hget(KEY_PREFIX + bucket, "tokens") or 0)
        return held, after, decision.remaining - int(after)

    held, after, granted = asyncio.run(run())
    # Redis refills 10/s of real time meanwhile: a few milliseconds, well under 0.5.
    assert held + 4 - 1 - granted <= after < held + 4 - 1 - granted + 0.5


def test_the_limit_holds_across_processes_that_lease(client: redis.asyncio.Redis) -> None:
    async def run() -> tuple[int, float]:
        started = time.monotonic()
        clock = FakeClock()
        one, two = (
            RateLimiter(client, rate_per_s=10, burst=30, lease_s=2.0, clock=clock) for _ in range(2)
        )
        bucket = f"lease-{uuid.uuid4()}"
        allowed = 0
        for step in range(200):
            if step % 20 == 0:
                clock.now += 2.0  # leases grow with demand, expire and go back
            limiter = one if step % 2 else two
            allowed += (await limiter.hit(bucket)).allowed
        return allowed, time.monotonic() - started

    allowed, seconds = asyncio.run(run())
    # 30 in the bucket, plus Redis's own refill at 10/s over the test's real time; the
    # two leases hold at most 10 each unspent at any moment.
    assert 30 - 2 * 10 <= allowed <= 30 + 10 * seconds + 1
