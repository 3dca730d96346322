"""The worker's presence key (memwell/core/worker_presence.py), refreshed from the
consumer's event loop.

A consumer bootstep: Celery starts it once the broker connection and the task
consumer are up, stops it when the connection is lost, and starts it again after a
reconnect. So the key exists exactly while this worker consumes, which is what
`memwell up` waits for before it prints "ready".
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any

import redis
from celery import bootsteps

from memwell.core import stack, worker_presence
from memwell.core.redis_clients import sync_client
from memwell.core.settings import get_settings

log = logging.getLogger(__name__)

SOCKET_TIMEOUT_S = 1.0  # the loop must not hang on a Redis that is going away


class Heartbeat(bootsteps.StartStopStep):
    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._timer_ref: Any = None
        self._client: redis.Redis | None = None
        self._hostname = ""
        self._queues: list[str] = []

    def start(self, parent: Any) -> None:
        self._hostname = str(parent.hostname)
        self._queues = sorted(q.name for q in parent.app.amqp.queues.consume_from.values())
        self._client = sync_client(
            stack.redis_url(get_settings()),
            socket_timeout=SOCKET_TIMEOUT_S,
            socket_connect_timeout=SOCKET_TIMEOUT_S,
        )
        self._beat()
        self._timer_ref = parent.timer.call_repeatedly(worker_presence.INTERVAL_S, self._beat)

    def _beat(self) -> None:
        if self._client is None:
            return
        try:
            worker_presence.announce(
                self._client, self._hostname, pid=os.getpid(), queues=self._queues
            )
        except redis.RedisError as exc:  # the consumer notices the outage on its own
            log.debug("presence key not refreshed: %s", exc)

    def stop(self, parent: Any) -> None:
        if self._timer_ref is not None:
            self._timer_ref.cancel()
            self._timer_ref = None
        if self._client is not None:
            with contextlib.suppress(redis.RedisError):  # else it expires on its own
                worker_presence.withdraw(self._client, self._hostname)
            self._client.close()
            self._client = None

    def shutdown(self, parent: Any) -> None:
        self.stop(parent)
