"""Bad input gets a clear 4xx problem+json and loses nothing; batches are atomic."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import Turn
from memwell.local.waiting import broker_idle, wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.problems import assert_problem


def test_chat_rejects_missing_and_blank_fields(api: TestClient) -> None:
    assert_problem(api.post("/v1/chat", json={"user_id": "u"}), 422, "invalid-input")
    body = assert_problem(
        api.post("/v1/chat", json={"user_id": "u", "session_id": "s", "message": "   "}),
        422,
        "invalid-input",
    )
    assert body["errors"][0]["loc"][-1] == "message"
    assert_problem(
        api.post("/v1/chat", json={"user_id": "u", "session_id": "s", "message": "a\x00b"}),
        422,
        "invalid-input",
    )
    assert_problem(
        api.post("/v1/chat", content=b"{not json", headers={"content-type": "application/json"}),
        422,
        "invalid-input",
    )


def test_unknown_route_is_a_problem_too(api: TestClient) -> None:
    assert_problem(api.get("/v1/nothing-here"), 404, "not-found")


def test_numeric_event_time_is_refused(api: TestClient, ids: dict[str, str]) -> None:
    """The schema offers an ISO-8601 string; a number (Unix time? milliseconds?) is a
    422, not silently read as seconds since 1970 (schemathesis found 1024 accepted)."""
    turn = {"user_id": ids["user"], "session_id": "s", "content": "x", "created_at": 1024}
    body = assert_problem(api.post("/v1/turns", json={"turns": [turn]}), 422, "invalid-input")
    assert body["errors"][0]["loc"][:4] == ["body", "turns", 0, "created_at"]

    search = {"user_id": ids["user"], "query": "q", "filters": {"created_before": 610322521216}}
    body = assert_problem(api.post("/v1/memories/search", json=search), 422, "invalid-input")
    assert body["errors"][0]["loc"][:3] == ["body", "filters", "created_before"]
    as_of = {"user_id": ids["user"], "query": "q", "as_of": 1.5}
    body = assert_problem(api.post("/v1/memories/search", json=as_of), 422, "invalid-input")
    assert body["errors"][0]["loc"][:2] == ["body", "as_of"]
    # A number in a string is the same mix-up.
    memory = {"user_id": ids["user"], "memories": [{"content": "x", "valid_to": "0"}]}
    body = assert_problem(api.post("/v1/memories", json=memory), 422, "invalid-input")
    assert body["errors"][0]["loc"][-1] == "valid_to"


def test_an_offset_postgres_cannot_hold_is_the_same_instant_in_utc(
    api: TestClient, ids: dict[str, str]
) -> None:
    """Python reads UTC offsets up to 23:59, Postgres only up to 15:59: "-17:21" was a 500
    (schemathesis). The instant is kept, in UTC; a date that leaves the calendar when
    moved to UTC is a 422."""
    memory = {"content": "Ada ran a marathon.", "valid_from": "2023-10-01T07:42:30-17:21"}
    added = api.post("/v1/memories", json={"user_id": ids["user"], "memories": [memory]})
    assert added.status_code == 200, added.text
    stored = api.get(f"/v1/memories/{added.json()['results'][0]['memory_id']}").json()
    assert stored["valid_from"].replace("Z", "+00:00") == "2023-10-02T01:03:30+00:00"
    early = {"content": "x", "valid_from": "0001-01-01T00:00:00+05:00"}
    body = assert_problem(
        api.post("/v1/memories", json={"user_id": ids["user"], "memories": [early]}),
        422,
        "invalid-input",
    )
    assert body["errors"][0]["loc"][-1] == "valid_from"


def test_nul_in_a_memory_source_is_refused(api: TestClient, ids: dict[str, str]) -> None:
    memory = {"user_id": ids["user"], "memories": [{"content": "x", "source": "crm\x00"}]}
    body = assert_problem(api.post("/v1/memories", json=memory), 422, "invalid-input")
    assert body["errors"][0]["loc"][-1] == "source"


def test_batch_with_one_bad_turn_is_rejected_whole(
    api: TestClient,
    worker: WorkerProcess,
    db: sessionmaker[Session],
    ids: dict[str, str],
    stack_env: dict[str, str],
) -> None:
    good = {
        "id": f"good-{ids['user']}",
        "user_id": ids["user"],
        "session_id": "s",
        "content": "fine",
    }
    bad = {
        "id": f"bad-{ids['user']}",
        "user_id": ids["user"],
        "session_id": "s",
        "content": "x",
        "created_at": "3999-01-01T00:00:00Z",
    }
    body = assert_problem(api.post("/v1/turns", json={"turns": [good, bad]}), 422, "invalid-input")
    assert body["errors"][0]["loc"][:3] == ["body", "turns", 1]

    sentinel = {"user_id": ids["user"], "session_id": "s", "content": "sentinel"}
    accepted = api.post("/v1/turns", json={"turns": [sentinel]})
    assert accepted.status_code == 202
    sentinel_id = accepted.json()["turn_ids"][0]
    wait_for(
        lambda: api.get(f"/v1/turns/{sentinel_id}").json()["status"] == "processed", timeout=60
    )
    wait_for(lambda: broker_idle(stack_env["REDIS_URL"]), timeout=60, what="the queue to drain")
    with db() as session:
        stored = set(session.scalars(select(Turn.content).where(Turn.user_id == ids["user"])).all())
    assert stored == {"sentinel"}


def test_batch_is_accepted_and_processed(
    api: TestClient, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    turns = [
        {"user_id": ids["user"], "session_id": "s", "content": f"I have {n} cats.", "role": "user"}
        for n in range(3)
    ]
    response = api.post("/v1/turns", json={"turns": turns})
    assert response.status_code == 202
    turn_ids = response.json()["turn_ids"]
    assert len(turn_ids) == 3
    wait_for(
        lambda: all(api.get(f"/v1/turns/{t}").json()["status"] == "processed" for t in turn_ids),
        timeout=60,
    )
