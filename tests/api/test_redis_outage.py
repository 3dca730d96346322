"""A Redis outage and restart under a running API, on a Valkey of this test's own.

During the outage, what needs Redis (the chat path's buffer) answers 503 with
Retry-After, never 500; what needs only Postgres (listing and searching memories)
keeps answering, the rate limiter failing open and access tracking failing quietly.
After the restart, the very first requests succeed: stale pooled connections are
retried, not reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from memwell.core.settings import get_settings
from memwell.local.embedded import EmbeddedRedis
from tests.support.live_api import free_port
from tests.support.problems import assert_problem


@pytest.fixture
def own_valkey(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(data_dir=tmp_path / "valkey", port=free_port(), appendonly=False)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _requests(client: TestClient, user: str) -> dict[str, httpx.Response]:
    chat = {"user_id": user, "session_id": "s", "message": "I live in Lisbon."}
    return {
        "chat": client.post("/v1/chat", json=chat),
        "list": client.get("/v1/memories", params={"user_id": user}),
        "search": client.post("/v1/memories/search", json={"user_id": user, "query": "Lisbon"}),
    }


def test_redis_outage_answers_503_and_a_restart_answers_200_at_once(
    stack_env: dict[str, str],
    auth_headers: dict[str, str],
    own_valkey: EmbeddedRedis,
    ids: dict[str, str],
) -> None:
    from api.main import create_app

    url = f"redis://127.0.0.1:{own_valkey.port}/0"
    settings = get_settings().model_copy(update={"redis_url": url})
    # An unmapped error would raise here (a 500), so the test sees every one.
    client = TestClient(create_app(settings), headers=auth_headers)
    with client:
        # Fill the pool: these connections go stale when Valkey stops.
        assert {k: r.status_code for k, r in _requests(client, ids["user"]).items()} == {
            "chat": 200, "list": 200, "search": 200,
        }  # fmt: skip

        own_valkey.stop()
        down = _requests(client, ids["user"])
        body = assert_problem(down["chat"], 503, "unavailable")
        assert "Redis" in body["detail"]
        assert int(down["chat"].headers["Retry-After"]) >= 1
        # Postgres-only reads go on: the limiter fails open, access tracking is
        # fire-and-forget.
        assert down["list"].status_code == 200, down["list"].text
        assert down["search"].status_code == 200, down["search"].text
        readyz = client.get("/readyz")
        assert_problem(readyz, 503, "unavailable")
        assert "Retry-After" in readyz.headers

        own_valkey.start()  # the same port
        after = [_requests(client, ids["user"]) for _ in range(3)]
        statuses = [{k: r.status_code for k, r in round_.items()} for round_ in after]
        assert statuses == [{"chat": 200, "list": 200, "search": 200}] * 3
        assert client.get("/readyz").status_code == 200
