"""Which Celery workers are alive, as seen in Redis.

Each worker's consumer writes a key with a short expiry every few seconds from its
event loop (worker/heartbeat.py), and deletes it on a clean stop. `/readyz` and
`memwell up` count the keys. Cheaper than a broadcast ping (no reply to wait for),
and honest: a worker whose broker connection is down, or whose loop hangs, stops
refreshing its key and drops out within `TTL_S`.
"""

from __future__ import annotations

import time

import orjson
import redis
import redis.asyncio as aioredis

KEY_PREFIX = "memwell:worker:"
INTERVAL_S = 2.0
TTL_S = 10  # several missed beats: a busy loop is not taken for a dead worker


def _key(hostname: str) -> str:
    return f"{KEY_PREFIX}{hostname}"


def announce(client: redis.Redis, hostname: str, *, pid: int, queues: list[str]) -> None:
    """This worker is consuming; say so for the next `TTL_S` seconds."""
    record = {"pid": pid, "queues": queues, "at": time.time()}
    client.set(_key(hostname), orjson.dumps(record), ex=TTL_S)


def withdraw(client: redis.Redis, hostname: str) -> None:
    """This worker stopped consuming."""
    client.delete(_key(hostname))


def _names(keys: list[bytes | str]) -> list[str]:
    raw = [k.decode() if isinstance(k, bytes) else k for k in keys]
    return sorted(k[len(KEY_PREFIX) :] for k in raw)


def alive(client: redis.Redis) -> list[str]:
    """Names of the workers that announced themselves within `TTL_S`."""
    return _names(list(client.scan_iter(match=f"{KEY_PREFIX}*", count=100)))


async def alive_async(client: aioredis.Redis) -> list[str]:
    """`alive`, for the API's asyncio client."""
    return _names([k async for k in client.scan_iter(match=f"{KEY_PREFIX}*", count=100)])
