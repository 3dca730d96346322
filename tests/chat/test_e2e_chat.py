"""The whole memory loop on real parts: API -> Redis buffer -> Celery worker ->
Postgres/pgvector -> retrieval in a new session."""

from __future__ import annotations

import redis
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from api.main import create_app
from memwell.buffer.session_buffer import summary_key
from memwell.core.settings import Settings
from memwell.db.models import Memory
from memwell.llm.recall import LABEL
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess


def _processed(api: TestClient, turn_ids: list[str]) -> bool:
    return all(api.get(f"/v1/turns/{t}").json()["status"] == "processed" for t in turn_ids)


def test_fact_from_session_one_is_recalled_in_session_two(
    api: TestClient, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    user = ids["user"]
    first = api.post(
        "/v1/chat",
        json={"user_id": user, "session_id": "one", "message": "My sister Maren lives in Tromsø."},
    )
    assert first.status_code == 200, first.text
    turn_ids = first.json()["turn_ids"]
    assert len(turn_ids) == 2

    wait_for(lambda: _processed(api, turn_ids), timeout=60, what="session 1 consolidated")

    second = api.post(
        "/v1/chat",
        json={"user_id": user, "session_id": "two", "message": "Where does my sister live?"},
    )
    body = second.json()
    assert second.status_code == 200, second.text
    assert body["memories"], "nothing recalled across sessions"
    top = body["memories"][0]
    assert "Tromsø" in top["content"]
    assert top["relevance"] >= 0.2 and top["score"] >= top["relevance"] * 0.9
    assert turn_ids[0] in top["source_turn_ids"]
    assert body["reply"].startswith(LABEL) and "Tromsø" in body["reply"]
    assert {"buffer", "embed", "retrieve", "model", "enqueue", "total"} <= body["timings_ms"].keys()


def test_memories_stay_with_their_user(
    api: TestClient, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    owner, other = ids["user"], ids["user"] + "-other"
    said = api.post(
        "/v1/chat",
        json={"user_id": owner, "session_id": "a", "message": "My locker code is 4417."},
    ).json()
    wait_for(lambda: _processed(api, said["turn_ids"]), timeout=60, what="consolidation")
    asked = api.post(
        "/v1/chat", json={"user_id": other, "session_id": "b", "message": "What is my locker code?"}
    ).json()
    assert all("4417" not in m["content"] for m in asked["memories"])


def test_assistant_turns_are_logged_but_not_remembered(
    api: TestClient, worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    said = api.post(
        "/v1/chat",
        json={
            "user_id": ids["user"],
            "session_id": "s",
            "message": "I collect vinyl records from the seventies.",
        },
    ).json()
    wait_for(lambda: _processed(api, said["turn_ids"]), timeout=60, what="consolidation")
    with db() as session:
        contents = session.scalars(
            select(Memory.content).where(Memory.user_id == ids["user"])
        ).all()
    assert contents == ["The user collects vinyl records from the seventies."]


def test_turns_a_chat_evicts_fold_into_the_session_summary(
    stack_env: dict[str, str], worker: WorkerProcess, ids: dict[str, str]
) -> None:
    settings = Settings(
        database_url=stack_env["DATABASE_URL"],
        redis_url=stack_env["REDIS_URL"],
        embedding_provider="local",
        auth_disabled=True,
        buffer_token_budget=60,
    )
    user, session = ids["user"], ids["session"]
    with TestClient(create_app(settings)) as client:
        for topic in ("roses", "tomatoes", "beehives", "compost heaps"):
            said = client.post(
                "/v1/chat",
                json={
                    "user_id": user,
                    "session_id": session,
                    "message": f"This spring I am learning everything about {topic} in the garden.",
                },
            )
            assert said.status_code == 200, said.text
    buffer = redis.Redis.from_url(stack_env["REDIS_URL"])
    key = summary_key(settings.default_tenant, user, session)
    # The summary request went to the broker on the API's own Redis client; a real
    # worker folds the evicted turns in.
    wait_for(lambda: buffer.get(key) is not None, timeout=60, what="the running summary")
    assert b"roses" in (buffer.get(key) or b"")


def test_the_demo_facts_are_remembered_without_greetings(
    api: TestClient, worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    from memwell.local.demo import FACTS

    user = ids["user"]
    turn_ids: list[str] = []
    for fact in FACTS:
        said = api.post("/v1/chat", json={"user_id": user, "session_id": "one", "message": fact})
        assert said.status_code == 200, said.text
        turn_ids += said.json()["turn_ids"]
    wait_for(lambda: _processed(api, turn_ids), timeout=60, what="the demo consolidated")
    with db() as session:
        contents = session.scalars(
            select(Memory.content).where(Memory.tenant == "default", Memory.user_id == user)
        ).all()
    assert "The user's name is Ada Okafor." in contents
    assert not any(c.startswith("Hi") for c in contents)
