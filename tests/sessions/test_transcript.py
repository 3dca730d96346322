"""A session's transcript merges its stored turns and its Redis buffer, each turn once,
in the session's order; clearing the whole session empties both."""

from __future__ import annotations

import redis
from fastapi.testclient import TestClient

from memwell.buffer.session_buffer import SyncSessionBuffer


def test_stored_and_buffered_turns_merge_once_in_order(
    api: TestClient, redis_url: str, ids: dict[str, str]
) -> None:
    user, sid = ids["user"], ids["session"]
    stored = [
        {"id": "a", "user_id": user, "session_id": sid, "content": "First, stored.",
         "created_at": "2026-03-01T09:00:00Z"},
        {"id": "b", "user_id": user, "session_id": sid, "content": "Second, in both.",
         "role": "assistant", "created_at": "2026-03-01T09:01:00Z"},
    ]  # fmt: skip
    assert api.post("/v1/turns", json={"turns": stored}).status_code == 202
    client = redis.Redis.from_url(redis_url)
    buffer = SyncSessionBuffer(client, token_budget=1000, ttl_s=600)
    buffer.append("default", user, sid, [
        buffer.make_turn(turn_id="b", role="assistant", content="Second, in both.",
                         created_at="2026-03-01T09:01:00+00:00"),
        buffer.make_turn(turn_id="c", role="user", content="Third, only buffered.",
                         created_at="2026-03-01T09:02:00+00:00"),
    ])  # fmt: skip

    body = api.get("/v1/turns", params={"user_id": user, "session_id": sid}).json()
    assert [(t["turn_id"], t["stored"]) for t in body["turns"]] == [
        ("a", True),
        ("b", True),
        ("c", False),
    ]
    # A worker of an earlier test may have consolidated them already.
    assert body["turns"][0]["status"] in ("pending", "processed")
    assert body["turns"][2]["status"] is None
    newest = api.get("/v1/turns", params={"user_id": user, "session_id": sid, "limit": 1})
    assert [t["turn_id"] for t in newest.json()["turns"]] == ["c"]

    cleared = api.delete("/v1/turns", params={"user_id": user, "session_id": sid}).json()
    assert cleared["counts"]["turns"] == 2 and cleared["counts"]["redis_keys"] >= 1
    assert api.get("/v1/turns", params={"user_id": user, "session_id": sid}).json()["turns"] == []
    assert buffer.read("default", user, sid).turns == []
    client.close()


def test_unknown_parameters_and_bad_ids_are_refused(api: TestClient, ids: dict[str, str]) -> None:
    for params in (
        {"user_id": ids["user"]},
        {"user_id": ids["user"], "session_id": "s", "sort": "newest"},
        {"user_id": ids["user"], "session_id": "s\x00"},
    ):
        for method in ("GET", "DELETE"):
            response = api.request(method, "/v1/turns", params=params)
            assert response.status_code == 422, (method, params, response.text)
            assert response.headers["content-type"].startswith("application/problem+json")
