"""A short-lived, per-process cache of authenticated API keys.

Looking a key up costs a Postgres round trip or three on every request; the chat
path's budget is a few milliseconds. Entries live MEMWELL_AUTH_CACHE_S seconds, so a
revoked key keeps working at most that long in a process that saw it recently
(unknown keys are never cached: a wrong key costs a lookup every time, and a key
created a moment ago works at once).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memwell.auth.keys import Principal, authenticate, hash_key

MAX_ENTRIES: Final = 10_000


class KeyCache:
    def __init__(
        self,
        ttl_s: float,
        *,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        # Keyed by the key's hash: the cache never holds a usable secret.
        self._entries: OrderedDict[str, tuple[float, Principal]] = OrderedDict()

    def get(self, key: str) -> Principal | None:
        if self.ttl_s <= 0:
            return None
        digest = hash_key(key)
        entry = self._entries.get(digest)
        if entry is None:
            return None
        expires, principal = entry
        if self._clock() >= expires:
            return None  # kept (until evicted) for `seen`, never trusted again
        return principal

    def seen(self, key: str) -> bool:
        """Whether this process verified `key` before, however long ago (a hint of
        whom to keep serving while its address is refused for failures; never a
        reason to trust it without a fresh lookup)."""
        return hash_key(key) in self._entries

    def put(self, key: str, principal: Principal) -> None:
        if self.ttl_s <= 0:
            return
        digest = hash_key(key)
        self._entries[digest] = (self._clock() + self.ttl_s, principal)
        self._entries.move_to_end(digest)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)


async def verify_key(
    cache: KeyCache, sessions: async_sessionmaker[AsyncSession], key: str
) -> Principal | None:
    """The principal of a live key, from the cache or one lookup; None if unknown."""
    found = cache.get(key)
    if found is None:
        async with sessions() as session:
            found = await authenticate(session, key)
        if found is not None:
            cache.put(key, found)
    return found
