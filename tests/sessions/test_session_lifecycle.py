"""One session on real parts (API, Redis buffer, worker, Postgres): read it with its
buffer, close it now, delete it with or without its memories, and who may delete."""

from __future__ import annotations

from collections.abc import Callable

import redis
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from memwell.buffer.session_buffer import SyncSessionBuffer
from memwell.db.models import Memory, MemoryEvent
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.problems import assert_problem

FACTS = ["My dog Biscuit is a three-legged greyhound.", "I work as a glassblower in Murano."]


def _processed(api: TestClient, turn_ids: list[str]) -> bool:
    return all(api.get(f"/v1/turns/{t}").json()["status"] == "processed" for t in turn_ids)


def _chat(api: TestClient, user: str, session: str, messages: list[str]) -> list[str]:
    """Say each message over /v1/chat (which fills the buffer); the turn ids, in order."""
    turn_ids: list[str] = []
    for message in messages:
        response = api.post(
            "/v1/chat", json={"user_id": user, "session_id": session, "message": message}
        )
        assert response.status_code == 200, response.text
        turn_ids += response.json()["turn_ids"]
    wait_for(lambda: _processed(api, turn_ids), timeout=90, what="the chat consolidated")
    return turn_ids


def _memories_of(db: sessionmaker[Session], user: str, session: str) -> tuple[int, int]:
    """(memories, their history events) of one session, as stored."""
    with db() as s:
        ids = s.scalars(
            select(Memory.id).where(
                Memory.tenant == "default", Memory.user_id == user, Memory.session_id == session
            )
        ).all()
        events = s.scalar(
            select(func.count()).where(
                MemoryEvent.tenant == "default", MemoryEvent.memory_id.in_(ids)
            )
        )
    return len(ids), int(events or 0)


def test_read_shows_the_row_the_turns_and_the_buffer(
    api: TestClient, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    user, sid = ids["user"], ids["session"]
    turn_ids = _chat(api, user, sid, FACTS)

    response = api.get(f"/v1/sessions/{sid}", params={"user_id": user})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == sid and body["user_id"] == user and body["status"] == "open"
    assert body["turn_count"] == 4 and set(body["turn_ids"]) == set(turn_ids)
    assert body["created_at"] and body["last_activity_at"] and body["closed_at"] is None
    buffered = body["buffer"]["turns"]
    assert [t["turn_id"] for t in buffered] == turn_ids  # oldest first, as in the prompt
    assert [t["role"] for t in buffered] == ["user", "assistant"] * 2
    assert buffered[0]["content"] == FACTS[0] and all(t["tokens"] > 0 for t in buffered)
    assert body["buffer"]["total_tokens"] == sum(t["tokens"] for t in buffered)

    listed = api.get("/v1/sessions", params={"user_id": user}).json()["sessions"]
    assert [(s["id"], s["turn_count"]) for s in listed] == [(sid, 4)]


def test_unknown_sessions_are_not_found(
    api: TestClient, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    user, sid = ids["user"], ids["session"]
    _chat(api, user, sid, ["I like cheese."])
    for path, params in (
        (f"/v1/sessions/{sid}-nope", {"user_id": user}),
        (f"/v1/sessions/{sid}", {"user_id": user + "-other"}),  # not that user's
    ):
        assert_problem(api.get(path, params=params), 404, "not-found")
        assert_problem(api.post(f"{path}/close", params=params), 404, "not-found")
        assert_problem(api.delete(path, params=params), 404, "not-found")


def test_close_writes_the_summary_and_empties_the_buffer(
    api: TestClient, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    user, sid = ids["user"], ids["session"]
    _chat(api, user, sid, FACTS)

    response = api.post(f"/v1/sessions/{sid}/close", params={"user_id": user})
    assert response.status_code == 200, response.text
    closed = response.json()
    assert closed["status"] == "closed" and closed["closed_at"]
    assert closed["summary"] == "\n".join(f"- {fact}" for fact in FACTS)  # the user's turns
    assert closed["buffer"] == {"turns": [], "total_tokens": 0, "summary": None}
    assert api.get(f"/v1/sessions/{sid}", params={"user_id": user}).json() == closed
    again = api.post(f"/v1/sessions/{sid}/close", params={"user_id": user})
    assert again.json() == closed  # nothing new to fold: the same summary and closed_at
    item = api.get("/v1/sessions", params={"user_id": user}).json()["sessions"][0]
    assert item["status"] == "closed" and item["summary_excerpt"] == closed["summary"]


def test_a_session_only_in_the_buffer_can_be_read_and_closed(
    api: TestClient, redis_url: str, ids: dict[str, str]
) -> None:
    """Its turns are on their way to Postgres (no worker here): the buffer is all
    there is, and closing makes the row."""
    user, sid = ids["user"], ids["session"]
    client = redis.Redis.from_url(redis_url)
    buffer = SyncSessionBuffer(client, token_budget=1000, ttl_s=600)
    turn = buffer.make_turn(turn_id="t1", role="user", content="Hi", created_at="2026-03-01")
    buffer.append("default", user, sid, [turn])
    client.close()

    body = api.get(f"/v1/sessions/{sid}", params={"user_id": user}).json()
    assert (body["status"], body["turn_count"], body["turn_ids"]) == ("open", 0, [])
    assert [t["turn_id"] for t in body["buffer"]["turns"]] == ["t1"]
    closed = api.post(f"/v1/sessions/{sid}/close", params={"user_id": user}).json()
    assert (closed["status"], closed["summary"], closed["buffer"]["turns"]) == ("closed", None, [])
    assert api.get("/v1/sessions", params={"user_id": user}).json()["sessions"][0]["id"] == sid


def test_delete_keeps_the_memories_unless_asked(
    api: TestClient, worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    user = ids["user"]
    kept, dropped = ids["session"] + "-kept", ids["session"] + "-dropped"
    _chat(api, user, kept, FACTS[:1])
    _chat(api, user, dropped, FACTS[1:])
    memories_kept, _ = _memories_of(db, user, kept)
    memories_dropped, events_dropped = _memories_of(db, user, dropped)
    assert memories_kept and memories_dropped and events_dropped

    response = api.delete(f"/v1/sessions/{kept}", params={"user_id": user})
    assert response.status_code == 200, response.text
    receipt = response.json()
    assert (receipt["tenant"], receipt["user_id"], receipt["session_id"]) == ("default", user, kept)
    # The chat left the buffer's list and token total in Redis.
    assert receipt["counts"] == {
        "turns": 2, "sessions": 1, "memories": 0, "memory_events": 0, "redis_keys": 2,
        "turns_in_flight": 0,
    }  # fmt: skip
    assert _memories_of(db, user, kept)[0] == memories_kept
    assert_problem(api.get(f"/v1/sessions/{kept}", params={"user_id": user}), 404, "not-found")

    response = api.delete(
        f"/v1/sessions/{dropped}", params={"user_id": user, "with_memories": "true"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["counts"] == {
        "turns": 2, "sessions": 1, "memories": memories_dropped,
        "memory_events": events_dropped, "redis_keys": 2, "turns_in_flight": 0,
    }  # fmt: skip
    assert _memories_of(db, user, dropped) == (0, 0)
    assert _memories_of(db, user, kept)[0] == memories_kept  # another session's stay
    listed = api.get("/v1/sessions", params={"user_id": user}).json()
    assert listed == {"sessions": [], "next_cursor": None}
    assert_problem(
        api.delete(f"/v1/sessions/{dropped}", params={"user_id": user}), 404, "not-found"
    )


def test_deleting_needs_the_admin_scope(
    api: TestClient,
    worker: WorkerProcess,
    make_key: Callable[..., dict[str, str]],
    ids: dict[str, str],
) -> None:
    user, sid = ids["user"], ids["session"]
    _chat(api, user, sid, ["I like cheese."])
    reader, writer = make_key("default", ("read",)), make_key("default", ("read", "write"))
    params = {"user_id": user}
    assert_problem(
        api.delete(f"/v1/sessions/{sid}", params=params, headers=reader), 403, "forbidden"
    )
    assert_problem(
        api.delete(f"/v1/sessions/{sid}", params=params, headers=writer), 403, "forbidden"
    )
    assert_problem(
        api.post(f"/v1/sessions/{sid}/close", params=params, headers=reader), 403, "forbidden"
    )
    assert api.get(f"/v1/sessions/{sid}", params=params, headers=reader).status_code == 200
    assert api.post(f"/v1/sessions/{sid}/close", params=params, headers=writer).status_code == 200
