"""Kill a test's worker as a crash would, then give its messages back to their queues.

A worker killed with SIGKILL (tasks acknowledged late) leaves every message it held in
the broker's `unacked` hash, and Kombu returns them to their queues only after the
visibility timeout (an hour by default). Until then `broker_idle` is false, and a
later test that waits for the queues to drain times out: a test-order flake. So after
the kill, each unacknowledged message that no live worker holds goes back to its
queue at once, through Kombu's own restore (the transaction a clean shutdown runs).
The task in progress then runs again, which idempotent tasks allow.
"""

from __future__ import annotations

import json
from typing import Any

from celery import Celery

from memwell.intake.dispatch import producer_app
from memwell.local.worker_process import WorkerProcess

#: How long live workers get to say what they hold; they answer from their event loop.
INSPECT_TIMEOUT_S = 2.0


def kill_worker(worker: WorkerProcess, redis_url: str) -> list[str]:
    """SIGKILL `worker` and give back what it held; the task ids given back."""
    worker.kill()
    return give_back_unheld(redis_url)


def held_by_live_workers(app: Celery) -> set[str]:
    """The ids of the tasks that live workers hold: running, reserved or scheduled."""
    inspect = app.control.inspect(timeout=INSPECT_TIMEOUT_S)
    held: set[str] = set()
    for replies in (inspect.active(), inspect.reserved()):
        for requests in (replies or {}).values():
            held.update(r["id"] for r in requests)
    for scheduled in (inspect.scheduled() or {}).values():
        held.update(s["request"]["id"] for s in scheduled)
    return held


def give_back_unheld(redis_url: str) -> list[str]:
    """Restore to its queue each message in `unacked` that no live worker holds; the
    task ids given back.

    The snapshot comes first: a message delivered after it is not in it, and one a live
    worker acknowledged after it is gone when its restore (a transaction watching the
    hash) looks for it. A worker answers the inspection from the loop that also takes
    and acknowledges its messages, so every message it holds is in its answer."""
    app = producer_app(redis_url)
    with app.connection_for_write() as conn:
        channel: Any = conn.default_channel
        snapshot = channel.client.hgetall(channel.unacked_key)
        held = held_by_live_workers(app)
        given: list[str] = []
        for tag, entry in snapshot.items():
            task_id = task_id_of(entry)
            if task_id in held:
                continue
            channel.qos.restore_by_tag(tag, client=channel.client)
            given.append(task_id or "")
        return given


def task_id_of(entry: bytes) -> str | None:
    """The task id of an `unacked` entry (Kombu's [message, exchange, routing key])."""
    message, _exchange, _routing_key = json.loads(entry)
    headers = message.get("headers") if isinstance(message, dict) else None
    task_id = headers.get("id") if isinstance(headers, dict) else None
    return task_id if isinstance(task_id, str) else None
