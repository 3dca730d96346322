"""The short-term memory tier: a token-budgeted buffer of a session's recent turns.

The chat path reads this buffer on every request to put the latest turns verbatim into
the prompt, so both `append` and `read` are exactly one Redis round trip. The buffer is
bounded by tokens, not turns, because the prompt budget is in tokens. Turns pushed out
by the budget are returned to the caller: they are what the background worker folds
into the session's running summary (kept next to the buffer, read in the same round
trip), so the prompt gets "summary of older turns + recent turns verbatim".

Eviction runs inside one Lua script (`append.lua`) so concurrent appends to one
session never leave the token total out of step with the list; removing named turns
(`remove.lua`) recounts the total in the same way. All keys of a session
share a TTL that every append refreshes: an abandoned session disappears on its own.

`SessionBuffer` (redis.asyncio) serves the API; `SyncSessionBuffer` (sync redis) serves
workers and the CLI. Both are thin shells over the same key functions, script and
(de)serialisation below.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final
from urllib.parse import quote

import redis
import redis.asyncio

from memwell.core.tokens import DEFAULT_COUNTER, TokenCounter

__all__ = [
    "KEY_PREFIX",
    "BufferSnapshot",
    "BufferedTurn",
    "SessionBuffer",
    "SyncSessionBuffer",
    "buffer_key",
    "summary_key",
    "tokens_key",
    "user_key_pattern",
]

KEY_PREFIX: Final = "mw:"


def _script(name: str) -> str:
    """A script of this package, behind the helper it shares with the others."""
    scripts = resources.files("memwell.buffer")
    return (
        scripts.joinpath("tokens_of.lua").read_text("utf-8")
        + "\n"
        + (scripts.joinpath(name).read_text("utf-8"))
    )


APPEND_SCRIPT: Final = _script("append.lua")
REMOVE_SCRIPT: Final = _script("remove.lua")

_ERASE_BATCH: Final = 500


# --- turns -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BufferedTurn:
    """One turn as the buffer stores it; `tokens` is counted once, at append time."""

    turn_id: str
    role: str
    content: str
    created_at: str  # ISO-8601
    tokens: int

    def __post_init__(self) -> None:
        # The Lua script parses the count back as digits; a negative one would also
        # let the buffer grow past its budget.
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens < 0:
            raise ValueError(f"tokens must be a non-negative int, got {self.tokens!r}")

    def to_json(self) -> str:
        """Compact JSON. "tokens" comes first: the append script reads it by prefix."""
        fields = {
            "tokens": self.tokens,
            "turn_id": self.turn_id,
            "role": self.role,
            "content": self.content,
            "created_at": self.created_at,
        }
        text = json.dumps(fields, separators=(",", ":"), ensure_ascii=False)
        if _is_utf8_encodable(text):
            return text
        # Lone surrogates cannot be sent as UTF-8; \u escapes carry them losslessly.
        return json.dumps(fields, separators=(",", ":"))

    @classmethod
    def from_json(cls, s: str | bytes) -> BufferedTurn:
        data = json.loads(s)
        if not isinstance(data, dict):
            raise ValueError("a buffered turn must be a JSON object")
        return cls(
            turn_id=_str_field(data, "turn_id"),
            role=_str_field(data, "role"),
            content=_str_field(data, "content"),
            created_at=_str_field(data, "created_at"),
            tokens=_int_field(data, "tokens"),
        )


def _is_utf8_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _str_field(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str):
        raise ValueError(f"buffered turn field {name!r} must be a string")
    return value


def _int_field(data: dict[str, Any], name: str) -> int:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"buffered turn field {name!r} must be an integer")
    return value


@dataclass(frozen=True)
class BufferSnapshot:
    """A session's buffer at one instant: turns oldest first, their token total and
    the running summary of the turns already evicted."""

    turns: list[BufferedTurn]
    total_tokens: int
    summary: str | None


# --- keys ------------------------------------------------------------------------------
#
# Layout: mw:{<tenant>:<user>:<session>}:<kind>. Each id is percent-encoded with no safe
# characters, so an encoded id never contains ":", "{", "}" or a glob metacharacter:
# the ":" separators are unambiguous (no two id triples share a key) and a SCAN pattern
# built from encoded ids matches literally. The braces are a Redis Cluster hash tag:
# one session's keys land in one slot, as the multi-key script and MULTI require.


def _encode_id(value: str) -> str:
    # surrogatepass keeps the encoding total (and injective) for any Python str.
    return quote(value, safe="", errors="surrogatepass")


def _session_base(tenant: str, user_id: str, session_id: str) -> str:
    parts = (_encode_id(tenant), _encode_id(user_id), _encode_id(session_id))
    return KEY_PREFIX + "{" + ":".join(parts) + "}"


def buffer_key(tenant: str, user_id: str, session_id: str) -> str:
    """The list of the session's buffered turns (JSON), oldest first."""
    return _session_base(tenant, user_id, session_id) + ":buf"


def tokens_key(tenant: str, user_id: str, session_id: str) -> str:
    """The token total of the buffered turns."""
    return _session_base(tenant, user_id, session_id) + ":tok"


def summary_key(tenant: str, user_id: str, session_id: str) -> str:
    """The session's running summary of evicted turns."""
    return _session_base(tenant, user_id, session_id) + ":sum"


_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


def _glob_escape(text: str) -> str:
    return _GLOB_SPECIAL.sub(r"\\\1", text)


def user_key_pattern(tenant: str, user_id: str) -> str:
    """A SCAN MATCH pattern for every buffer key of one user, across all sessions."""
    # Encoded ids hold no glob metacharacters today; escaping anyway keeps erasure
    # exact even if the id encoding ever changes.
    prefix = KEY_PREFIX + "{" + _encode_id(tenant) + ":" + _encode_id(user_id) + ":"
    return _glob_escape(prefix) + "*"


def _session_keys(tenant: str, user_id: str, session_id: str) -> list[str]:
    """The script's KEYS, in its order: list, total, summary."""
    base = _session_base(tenant, user_id, session_id)
    return [base + ":buf", base + ":tok", base + ":sum"]


# --- the shared core of both clients ---------------------------------------------------


def _text(value: bytes | str) -> str:
    # Works whether or not the client was built with decode_responses=True.
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _decode_turns(raw: Sequence[bytes | str] | None) -> list[BufferedTurn]:
    return [BufferedTurn.from_json(item) for item in raw or ()]


def _queue_read(
    pipe: redis.client.Pipeline | redis.asyncio.client.Pipeline, keys: list[str]
) -> None:
    # Queueing is synchronous on both pipeline flavours; only execute() differs.
    buf, tok, summ = keys
    pipe.lrange(buf, 0, -1)
    pipe.get(tok)
    pipe.get(summ)


def _snapshot(results: Sequence[Any]) -> BufferSnapshot:
    raw_turns, raw_total, raw_summary = results
    return BufferSnapshot(
        turns=_decode_turns(raw_turns),
        total_tokens=int(raw_total) if raw_total is not None else 0,
        summary=_text(raw_summary) if raw_summary is not None else None,
    )


class _BufferBase:
    """Configuration and everything that does no I/O, shared by both clients."""

    def __init__(self, *, token_budget: int, ttl_s: int, counter: TokenCounter | None) -> None:
        if token_budget < 1:
            raise ValueError("token_budget must be at least 1")
        if ttl_s < 1:
            raise ValueError("ttl_s must be at least 1 second")
        self.token_budget = token_budget
        self.ttl_s = ttl_s
        self.counter: TokenCounter = counter if counter is not None else DEFAULT_COUNTER

    def make_turn(self, *, turn_id: str, role: str, content: str, created_at: str) -> BufferedTurn:
        """A turn with its tokens counted by this buffer's counter."""
        return BufferedTurn(
            turn_id=turn_id,
            role=role,
            content=content,
            created_at=created_at,
            tokens=self.counter.count(content),
        )

    def _append_args(self, turns: Sequence[BufferedTurn]) -> list[str | int]:
        return [self.token_budget, self.ttl_s, *(turn.to_json() for turn in turns)]


# --- the two clients -------------------------------------------------------------------


class SessionBuffer(_BufferBase):
    """The session buffer over redis.asyncio, for the API's chat path."""

    def __init__(
        self,
        redis: redis.asyncio.Redis,
        *,
        token_budget: int,
        ttl_s: int,
        counter: TokenCounter | None = None,
    ) -> None:
        super().__init__(token_budget=token_budget, ttl_s=ttl_s, counter=counter)
        self._redis = redis
        self._append = redis.register_script(APPEND_SCRIPT)
        self._remove = redis.register_script(REMOVE_SCRIPT)

    async def append(
        self, tenant: str, user_id: str, session_id: str, turns: Sequence[BufferedTurn]
    ) -> list[BufferedTurn]:
        """Append turns (oldest first); returns the evicted turns, oldest first."""
        if not turns:
            return []
        keys = _session_keys(tenant, user_id, session_id)
        raw = await self._append(keys=keys, args=self._append_args(turns))
        return _decode_turns(raw)

    async def read(self, tenant: str, user_id: str, session_id: str) -> BufferSnapshot:
        """Turns, token total and summary, in one round trip."""
        # MULTI/EXEC costs nothing extra in a pipeline and keeps a concurrent append
        # from landing between LRANGE and GET (a list and total out of step).
        async with self._redis.pipeline(transaction=True) as pipe:
            _queue_read(pipe, _session_keys(tenant, user_id, session_id))
            return _snapshot(await pipe.execute())

    async def set_summary(self, tenant: str, user_id: str, session_id: str, summary: str) -> None:
        """Replace the running summary; it lives as long as the buffer."""
        await self._redis.set(summary_key(tenant, user_id, session_id), summary, ex=self.ttl_s)

    async def remove(
        self, tenant: str, user_id: str, session_id: str, turn_ids: Sequence[str]
    ) -> int:
        """Remove the named turns (the token total follows); returns turns removed."""
        if not turn_ids:
            return 0
        buf, tok, _ = _session_keys(tenant, user_id, session_id)
        return int(await self._remove(keys=[buf, tok], args=list(turn_ids)))

    async def clear(self, tenant: str, user_id: str, session_id: str) -> int:
        """Delete the session's buffer, total and summary; returns keys deleted."""
        return int(await self._redis.delete(*_session_keys(tenant, user_id, session_id)))


class SyncSessionBuffer(_BufferBase):
    """The session buffer over sync redis, for workers and the CLI."""

    def __init__(
        self,
        redis: redis.Redis,
        *,
        token_budget: int,
        ttl_s: int,
        counter: TokenCounter | None = None,
    ) -> None:
        super().__init__(token_budget=token_budget, ttl_s=ttl_s, counter=counter)
        self._redis = redis
        self._append = redis.register_script(APPEND_SCRIPT)

    def append(
        self, tenant: str, user_id: str, session_id: str, turns: Sequence[BufferedTurn]
    ) -> list[BufferedTurn]:
        """Append turns (oldest first); returns the evicted turns, oldest first."""
        if not turns:
            return []
        keys = _session_keys(tenant, user_id, session_id)
        return _decode_turns(self._append(keys=keys, args=self._append_args(turns)))

    def read(self, tenant: str, user_id: str, session_id: str) -> BufferSnapshot:
        """Turns, token total and summary, in one round trip."""
        with self._redis.pipeline(transaction=True) as pipe:
            _queue_read(pipe, _session_keys(tenant, user_id, session_id))
            return _snapshot(pipe.execute())

    def set_summary(self, tenant: str, user_id: str, session_id: str, summary: str) -> None:
        """Replace the running summary; it lives as long as the buffer."""
        self._redis.set(summary_key(tenant, user_id, session_id), summary, ex=self.ttl_s)

    def clear(self, tenant: str, user_id: str, session_id: str) -> int:
        """Delete the session's buffer, total and summary; returns keys deleted."""
        return int(self._redis.delete(*_session_keys(tenant, user_id, session_id)))

    def erase_user(self, tenant: str, user_id: str) -> int:
        """Delete every buffer key of one user (all sessions); returns keys deleted.

        SCAN, not KEYS: erasure must not block the server that serves the chat path.
        """
        deleted = 0
        batch: list[bytes | str] = []
        for key in self._redis.scan_iter(match=user_key_pattern(tenant, user_id), count=1000):
            batch.append(key)
            if len(batch) >= _ERASE_BATCH:
                deleted += self._unlink(batch)
                batch = []
        if batch:
            deleted += self._unlink(batch)
        return deleted

    def _unlink(self, keys: list[bytes | str]) -> int:
        # UNLINK frees memory off the main thread; deleting while SCAN iterates is safe.
        return int(self._redis.unlink(*keys))
