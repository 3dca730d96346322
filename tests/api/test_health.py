"""/readyz reports how many workers consume, from their presence keys in Redis, and the
local model server `memwell up --llm-gguf` runs, when there is one."""

from __future__ import annotations

import socket

import redis
from fastapi.testclient import TestClient

from api.main import create_app
from memwell.core import worker_presence
from memwell.core.settings import Settings
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.fake_openai import FakeOpenAI


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


def _readyz(stack_env: dict[str, str], local_llm_url: str | None) -> dict[str, object]:
    settings = Settings(
        database_url=stack_env["DATABASE_URL"], redis_url=stack_env["REDIS_URL"],
        local_llm_url=local_llm_url,
    )  # fmt: skip
    with TestClient(create_app(settings)) as client:
        answer = client.get("/readyz")
        assert answer.status_code == 200
        body: dict[str, object] = answer.json()
        return body


def test_readyz_shows_the_local_model_server(
    stack_env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    assert "model_server" not in _readyz(stack_env, None)
    server = _readyz(stack_env, fake_openai.base_url)["model_server"]
    assert server == {
        "url": fake_openai.base_url, "up": True, "status": "up",
        "models": [fake_openai.model_id], "port": fake_openai.port, "error": None,
    }  # fmt: skip


def test_a_model_server_down_is_shown_and_the_api_stays_ready(stack_env: dict[str, str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    body = _readyz(stack_env, f"http://127.0.0.1:{port}/v1")
    assert body["status"] == "ready"
    server = body["model_server"]
    assert isinstance(server, dict) and server["status"] == "down" and server["port"] == port
    assert str(server["error"]).startswith("ConnectError")
