"""The API's per-process key cache: a plain unit under a fake clock."""

from __future__ import annotations

from memwell.auth.key_cache import KeyCache
from memwell.auth.keys import Principal
from tests.support.clock import FakeClock

ADA = Principal(tenant="t", key_id="k1", scopes=frozenset({"read"}))


def test_entries_expire_after_the_ttl() -> None:
    clock = FakeClock()
    cache = KeyCache(5.0, clock=clock)
    assert cache.get("mw_a") is None
    cache.put("mw_a", ADA)
    clock.now += 4.9
    assert cache.get("mw_a") == ADA
    clock.now += 0.2
    assert cache.get("mw_a") is None


def test_zero_ttl_caches_nothing_and_size_is_bounded() -> None:
    off = KeyCache(0.0)
    off.put("mw_a", ADA)
    assert off.get("mw_a") is None
    small = KeyCache(60.0, max_entries=2)
    for key in ("mw_a", "mw_b", "mw_c"):
        small.put(key, ADA)
    assert small.get("mw_a") is None  # the oldest went first
    assert small.get("mw_b") == ADA and small.get("mw_c") == ADA
