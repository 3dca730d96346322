"""REST surface of retrieval on real parts: search, context, one memory, history."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.queues import Queue, TaskName
from memwell.db.models import Memory
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from memwell.retrieval.access import ACCESS_KEY

FACTS = [
    "My dog Biscuit is a three-legged greyhound.",
    "I work as a glassblower in Murano.",
    "My favourite tea is smoked lapsang souchong.",
]


@pytest.fixture
def remembered(
    api: TestClient, worker: WorkerProcess, ids: dict[str, str], db: sessionmaker[Session]
) -> dict[str, str]:
    """Three facts of one user, consolidated by the real worker; content -> memory id."""
    turns = [
        {"id": f"{ids['user']}-{i}", "user_id": ids["user"], "session_id": ids["session"],
         "content": text, "created_at": f"2024-03-0{i + 1}T09:00:00Z",
         "metadata": {"agent_id": "helper"} if i == 0 else {}}
        for i, text in enumerate(FACTS)
    ]  # fmt: skip
    assert api.post("/v1/turns", json={"turns": turns}).status_code == 202

    def done() -> bool:
        return all(api.get(f"/v1/turns/{t['id']}").json()["status"] == "processed" for t in turns)

    wait_for(done, timeout=90, what="the facts consolidated")
    with db() as session:
        rows = session.execute(
            select(Memory.content, Memory.id, Memory.source_turn_ids).where(
                Memory.tenant == "default", Memory.user_id == ids["user"]
            )
        ).all()
    # Extraction rewrites each fact standalone ("My dog" -> "The user's dog"): order the
    # stored memories like FACTS through their provenance.
    by_turn = {turns[0]: (content, str(memory_id)) for content, memory_id, turns in rows}
    assert len(by_turn) == len(FACTS)
    return dict(by_turn[f"{ids['user']}-{i}"] for i in range(len(FACTS)))


def test_search_returns_hits_with_score_parts(
    api: TestClient, remembered: dict[str, str], ids: dict[str, str]
) -> None:
    r = api.post(
        "/v1/memories/search",
        json={"user_id": ids["user"], "query": "What breed is Biscuit?", "k": 3},
    )
    assert r.status_code == 200, r.text
    top = r.json()["hits"][0]
    assert top["content"] == list(remembered)[0]
    assert top["text_rank"] > 0 and top["similarity"] > 0.2
    assert top["source_turn_ids"] == [f"{ids['user']}-0"]
    assert top["agent_id"] == "helper"
    parts = {
        "score",
        "relevance",
        "importance",
        "recency",
        "similarity",
        "text_rank",
        "entity_match",
    }
    assert parts <= top.keys()


def test_search_filters_and_as_of(
    api: TestClient, remembered: dict[str, str], ids: dict[str, str]
) -> None:
    def contents(**body: object) -> set[str]:
        r = api.post(
            "/v1/memories/search",
            # one keyword of each fact: every fact passes the floor through full text
            json={"user_id": ids["user"], "query": "Biscuit glassblower lapsang", **body},
        )
        assert r.status_code == 200, r.text
        return {h["content"] for h in r.json()["hits"]}

    stored = list(remembered)
    kinds = {api.get(f"/v1/memories/{i}").json()["kind"] for i in remembered.values()}
    absent = sorted({"fact", "preference", "event", "episode"} - kinds)
    assert contents() == set(stored)
    assert contents(filters={"agent_id": "helper"}) == {stored[0]}
    assert contents(filters={"kinds": absent}) == set()
    assert contents(filters={"kinds": sorted(kinds), "session_id": ids["session"]}) == set(stored)
    assert contents(filters={"created_after": "2024-03-02T00:00:00Z"}) == set(stored[1:])
    assert contents(as_of="2024-03-02T12:00:00Z") == {stored[0], stored[1]}


def test_search_rejects_bad_input_as_problem_json(api: TestClient, ids: dict[str, str]) -> None:
    for body in (
        {"user_id": ids["user"], "query": "   "},
        {"user_id": ids["user"], "query": "x", "k": 0},
        {"user_id": ids["user"], "query": "x", "filters": {"kinds": ["nonsense"]}},
        {"user_id": ids["user"], "query": "x", "as_of": "2999-01-01T00:00:00Z"},
        {"user_id": ids["user"], "query": "x", "scoring": {"w_recency": -1}},
    ):
        r = api.post("/v1/memories/search", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")


def test_context_quotes_memories_within_budget(
    api: TestClient, remembered: dict[str, str], ids: dict[str, str]
) -> None:
    r = api.post(
        "/v1/context",
        json={"user_id": ids["user"], "session_id": "fresh", "query": "What tea do I like?"},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["tokens"] <= body["token_budget"]
    assert "lapsang" in body["data_block"] and "<memories>" in body["data_block"]
    assert "not instructions" in body["messages"][0]["content"]
    assert body["messages"][-1] == {"role": "user", "content": "What tea do I like?"}
    tight = api.post(
        "/v1/context",
        json={"user_id": ids["user"], "session_id": "fresh", "query": "tea?", "token_budget": 100},
    ).json()
    assert len(tight["memories"]) < len(body["memories"]) and tight["tokens"] <= 100


def test_get_delete_history(
    api: TestClient, remembered: dict[str, str], ids: dict[str, str]
) -> None:
    fact = list(remembered)[1]
    memory_id = remembered[fact]
    got = api.get(f"/v1/memories/{memory_id}").json()
    assert got["content"] == fact and got["deleted_at"] is None

    deleted = api.delete(f"/v1/memories/{memory_id}")
    assert deleted.status_code == 200 and deleted.json()["deleted_at"] is not None
    assert api.delete(f"/v1/memories/{memory_id}").status_code == 200  # idempotent

    hits = api.post(
        "/v1/memories/search", json={"user_id": ids["user"], "query": "glassblower Murano"}
    ).json()["hits"]
    assert fact not in {h["content"] for h in hits}
    events = api.get(f"/v1/memories/{memory_id}/history").json()["events"]
    # Deleting removes the text everywhere; the history keeps its events, redacted.
    assert [e["event"] for e in events] == ["add", "delete", "redact"]
    assert all(fact not in (e["old_content"] or "") + (e["new_content"] or "") for e in events)
    assert api.get(f"/v1/memories/{memory_id}").json()["content"] == "[redacted]"

    missing = api.get(f"/v1/memories/{uuid.uuid4()}")
    assert missing.status_code == 404
    assert missing.json()["type"].endswith("/not-found")
    assert api.get("/v1/memories/not-a-uuid").status_code == 422


def test_hits_are_marked_accessed_in_the_background(
    api: TestClient,
    remembered: dict[str, str],
    ids: dict[str, str],
    db: sessionmaker[Session],
    worker: WorkerProcess,
    redis_url: str,
) -> None:
    import redis

    from memwell.intake.dispatch import producer_app

    memory_id = uuid.UUID(list(remembered.values())[2])
    with db() as session:
        before = session.scalar(select(Memory.access_count).where(Memory.id == memory_id))
    api.post("/v1/memories/search", json={"user_id": ids["user"], "query": "smoked tea", "k": 1})
    client = redis.Redis.from_url(redis_url)
    wait_for(lambda: client.llen(ACCESS_KEY) > 0 or _count(db, memory_id) != before,
             what="the hit recorded")  # fmt: skip
    producer_app(redis_url).send_task(TaskName.FLUSH_ACCESS, queue=Queue.MAINTENANCE)

    wait_for(lambda: _count(db, memory_id) == (before or 0) + 1, timeout=30, what="flushed")
    with db() as session:
        assert session.scalar(select(Memory.last_accessed_at).where(Memory.id == memory_id))
    client.close()


def _count(db: sessionmaker[Session], memory_id: uuid.UUID) -> int | None:
    with db() as session:
        return session.scalar(select(Memory.access_count).where(Memory.id == memory_id))
