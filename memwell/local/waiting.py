"""Wait on a condition with a timeout (tests, benchmarks and `memwell up` poll this way,
never with a fixed sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from memwell.core.redis_clients import sync_client

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T], *, timeout: float = 30.0, interval: float = 0.05, what: str = ""
) -> T:
    """Call `probe` until it returns a truthy value; TimeoutError after `timeout`."""
    deadline = time.monotonic() + timeout
    last: T = probe()
    while not last:
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what or probe}")
        time.sleep(interval)
        last = probe()
    return last


def broker_idle(redis_url: str) -> bool:
    """True when every Memwell queue is empty and no message is in flight.

    Celery's Redis transport keeps delivered-but-unacknowledged messages (acks_late)
    in the `unacked` hash, so an empty hash means no task is still running.
    """

    from memwell.core.queues import Queue

    client = sync_client(redis_url)
    try:
        queued = sum(int(client.llen(q.value)) for q in Queue)
        return queued == 0 and int(client.hlen("unacked")) == 0
    finally:
        client.close()
