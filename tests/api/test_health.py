"""/readyz reports how many workers consume, from their presence keys in Redis."""

from __future__ import annotations

import redis
from fastapi.testclient import TestClient

from memwell.core import worker_presence
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess


def test_readyz_counts_the_consuming_workers(
    api: TestClient, worker: WorkerProcess, stack_env: dict[str, str]
) -> None:
    client = redis.Redis.from_url(stack_env["REDIS_URL"])
    try:
        wait_for(lambda: worker.hostname in worker_presence.alive(client), timeout=30)
        before = api.get("/readyz").json()
        assert before["status"] == "ready"
        assert before["workers"] == len(worker_presence.alive(client)) >= 1

        worker_presence.announce(client, "extra@test", pid=1, queues=["ingest"])
        assert api.get("/readyz").json()["workers"] == before["workers"] + 1
        worker_presence.withdraw(client, "extra@test")
        assert api.get("/readyz").json()["workers"] == before["workers"]
    finally:
        client.close()


def test_presence_keys_expire_on_their_own(stack_env: dict[str, str]) -> None:
    client = redis.Redis.from_url(stack_env["REDIS_URL"])
    try:
        worker_presence.announce(client, "gone@test", pid=1, queues=["ingest"])
        ttl = int(client.ttl(f"{worker_presence.KEY_PREFIX}gone@test"))
        assert 0 < ttl <= worker_presence.TTL_S
        assert "gone@test" in worker_presence.alive(client)
    finally:
        worker_presence.withdraw(client, "gone@test")
        client.close()
