"""A Redis lock per maintenance job, so two beats (or a beat and a manual run) do not
do the same walk twice. The jobs are safe without it (SKIP LOCKED, idempotent
writes); the lock only saves the wasted work. It expires on its own, so a worker
killed while holding it blocks the job for at most `ttl_s`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress

import redis

from memwell.buffer.session_buffer import KEY_PREFIX


def lock_key(job: str) -> str:
    return f"{KEY_PREFIX}lock:maintenance:{job}"


@contextmanager
def job_lock(client: redis.Redis, job: str, *, ttl_s: float) -> Iterator[bool]:
    """Yield True while holding the job's lock, False if another run holds it."""
    lock = client.lock(lock_key(job), timeout=ttl_s, blocking=False)
    acquired = bool(lock.acquire(blocking=False))
    try:
        yield acquired
    finally:
        if acquired:
            # Expired meanwhile: another run may hold it now, and that is its lock.
            with suppress(redis.exceptions.LockError):
                lock.release()
