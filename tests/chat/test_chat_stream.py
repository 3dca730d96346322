"""POST /v1/chat with `"stream": true`: Server-Sent Events on the real stack (the local
recall responder, and LLM mode against the tests' fake endpoint), what is remembered
after a whole stream, a failed one and one the client cut off."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from api.main import create_app
from memwell.core.settings import Settings
from memwell.db.models import Turn
from memwell.llm.recall import LABEL
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.fake_openai import FakeOpenAI, Reply, Status

LONG_REPLY = " ".join(f"word{i}" for i in range(40))


@pytest.fixture(scope="module")
def llm_api(
    stack_env: dict[str, str], fake_openai: FakeOpenAI, auth_headers: dict[str, str]
) -> Iterator[TestClient]:
    settings = Settings(
        database_url=stack_env["DATABASE_URL"], redis_url=stack_env["REDIS_URL"],
        openai_base_url=fake_openai.base_url, openai_api_key="test-key",
        chat_model="scripted-model", embedding_provider="local", llm_timeout_s=5,
        pipeline_mode="local",
    )  # fmt: skip
    with TestClient(create_app(settings), headers=auth_headers) as client:
        yield client


@pytest.fixture
def fake(fake_openai: FakeOpenAI) -> Iterator[FakeOpenAI]:
    fake_openai.reset()
    yield fake_openai
    fake_openai.stream_chunk_delay = 0.0
    fake_openai.reset()


def sse(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    """(event, data) pairs of a text/event-stream, as they arrive."""
    name, data = "message", []
    for line in response.iter_lines():
        if line.startswith("event:"):
            name = line.partition(":")[2].strip()
        elif line.startswith("data:"):
            data.append(line.partition(":")[2].strip())
        elif not line and data:
            yield name, json.loads("\n".join(data))
            name, data = "message", []


def stream_chat(client: TestClient, body: dict[str, Any]) -> list[tuple[str, Any]]:
    with client.stream("POST", "/v1/chat", json={**body, "stream": True}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(sse(response))


def processed(client: TestClient, turn_ids: list[str]) -> bool:
    return all(client.get(f"/v1/turns/{t}").json()["status"] == "processed" for t in turn_ids)


def buffer_turns(client: TestClient, user: str, session: str) -> list[dict[str, Any]]:
    answer = client.get(f"/v1/sessions/{session}", params={"user_id": user})
    assert answer.status_code == 200, answer.text
    turns: list[dict[str, Any]] = answer.json()["buffer"]["turns"]
    return turns


def stored_turns(db: sessionmaker[Session], user: str, session: str) -> list[Turn]:
    with db() as s:
        return list(
            s.scalars(
                select(Turn).where(Turn.tenant == "default", Turn.user_id == user,
                                   Turn.session_id == session)
            )
        )  # fmt: skip


def test_events_come_in_order_and_the_reply_is_remembered(
    api: TestClient, worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    user = ids["user"]
    told = api.post(
        "/v1/chat", json={"user_id": user, "session_id": "one", "message": "My dog is Pixel."}
    ).json()
    wait_for(lambda: processed(api, told["turn_ids"]), timeout=60, what="the fact consolidated")

    events = stream_chat(api, {"user_id": user, "session_id": "two", "message": "My dog?"})

    names = [name for name, _ in events]
    assert names[0] == "memories" and names[-1] == "done"
    assert set(names[1:-1]) == {"token"} and len(names) > 3  # the recall reply, line by line
    memories = events[0][1]
    assert any("Pixel" in m["content"] for m in memories)
    assert {"id", "score", "relevance", "source_turn_ids"} <= memories[0].keys()
    reply = "".join(data["delta"] for name, data in events if name == "token")
    assert reply.startswith(LABEL) and "Pixel" in reply
    done = events[-1][1]
    assert done["model"] == "memwell-local-recall" and len(done["turn_ids"]) == 2
    timings = done["timings_ms"]
    assert {"buffer", "retrieve", "first_token", "model", "enqueue", "total"} <= timings.keys()

    wait_for(lambda: processed(api, done["turn_ids"]), timeout=60, what="the exchange stored")
    assert [(t["role"], t["content"]) for t in buffer_turns(api, user, "two")] == [
        ("user", "My dog?"),
        ("assistant", reply),
    ]
    stored = {t.id: t for t in stored_turns(db, user, "two")}
    assistant = stored[done["turn_ids"][1]]
    assert assistant.content == reply and assistant.metadata_ == {}


def test_without_stream_the_answer_is_one_json(api: TestClient, ids: dict[str, str]) -> None:
    for extra in ({}, {"stream": False}):
        answer = api.post(
            "/v1/chat", json={"user_id": ids["user"], "session_id": "s", "message": "Hi", **extra}
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "application/json"
        assert answer.json().keys() == {"reply", "model", "memories", "turn_ids", "timings_ms"}


def test_a_refused_request_is_a_problem_before_any_event(api: TestClient) -> None:
    with api.stream(
        "POST", "/v1/chat", json={"user_id": "u", "session_id": "s", "message": "", "stream": True}
    ) as response:
        assert response.status_code == 422
        assert response.headers["content-type"] == "application/problem+json"


def test_llm_mode_streams_the_model_deltas_in_order(
    llm_api: TestClient, fake: FakeOpenAI, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    fake.script_chat([Reply("You are training for the Berlin marathon.")])

    events = stream_chat(llm_api, {"user_id": ids["user"], "session_id": "s", "message": "Race?"})

    deltas = [data["delta"] for name, data in events if name == "token"]
    assert deltas == ["You ", "are ", "training ", "for ", "the ", "Berlin ", "marathon."]
    assert [name for name, _ in events] == ["memories", *["token"] * len(deltas), "done"]
    assert events[-1][1]["model"] == "scripted-model"
    sent = fake.chat_requests[0].json
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}

    turn_ids = events[-1][1]["turn_ids"]
    wait_for(lambda: processed(llm_api, turn_ids), timeout=60, what="the exchange stored")
    turns = buffer_turns(llm_api, ids["user"], "s")
    assert [t["content"] for t in turns] == ["Race?", "".join(deltas)]


def test_a_model_failure_is_an_error_event_and_nothing_is_remembered(
    llm_api: TestClient, fake: FakeOpenAI, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    fake.script_chat([Status(500), Status(500), Status(500)])  # the client retries twice

    events = stream_chat(llm_api, {"user_id": ids["user"], "session_id": "s", "message": "Hi"})

    assert [name for name, _ in events] == ["memories", "error"]
    error = events[1][1]
    assert error["status"] == 503 and error["type"].endswith("/unavailable")
    assert error["turn_ids"] == []
    # Neither tier knows the session: nothing of the exchange was written.
    unknown = llm_api.get("/v1/sessions/s", params={"user_id": ids["user"]})
    assert unknown.status_code == 404, unknown.text
    assert stored_turns(db, ids["user"], "s") == []


def test_a_client_that_hangs_up_leaves_the_partial_reply_remembered_once(
    llm_api: TestClient,
    fake: FakeOpenAI,
    worker: WorkerProcess,
    db: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    user = ids["user"]
    fake.script_chat([Reply(LONG_REPLY)])
    fake.stream_chunk_delay = 0.2  # 40 words: the reply would take seconds

    body = {"user_id": user, "session_id": "s", "message": "Tell me a long story.", "stream": True}
    with llm_api.stream("POST", "/v1/chat", json=body) as response:
        events = sse(response)
        assert next(events)[0] == "memories"
        name, first = next(events)
        assert name == "token"
    # Leaving the block hung up: the server stops, and keeps what it had sent.

    def truncated_turns() -> list[Turn]:
        return [t for t in stored_turns(db, user, "s") if t.role == "assistant"]

    stored = wait_for(truncated_turns, timeout=60, what="the truncated reply stored")
    assert len(stored) == 1
    partial = stored[0]
    assert partial.metadata_ == {"truncated": True}
    assert partial.content.startswith(first["delta"]) and partial.content != LONG_REPLY
    wait_for(lambda: processed(llm_api, [partial.id]), timeout=60, what="the turn processed")
    turns = buffer_turns(llm_api, user, "s")
    assert [(t["role"], t["content"]) for t in turns] == [
        ("user", "Tell me a long story."),
        ("assistant", partial.content),
    ]
    assert len(truncated_turns()) == 1


def test_a_hang_up_while_a_token_waits_to_be_sent_keeps_the_tokens_produced(
    api: TestClient, worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    """The other way a stream stops: its generator suspended at a token the client never
    took (the recall responder has no pauses), closed when the response ends."""
    user = ids["user"]
    body = {"user_id": user, "session_id": "s", "message": "Anything?", "stream": True}
    with api.stream("POST", "/v1/chat", json=body) as response:
        assert next(sse(response))[0] == "memories"

    def assistant_turns() -> list[Turn]:
        return [t for t in stored_turns(db, user, "s") if t.role == "assistant"]

    stored = wait_for(assistant_turns, timeout=60, what="the truncated reply stored")
    assert len(stored) == 1 and stored[0].metadata_ == {"truncated": True}
    whole = api.post("/v1/chat", json={**body, "stream": False, "session_id": "other"}).json()
    assert whole["reply"].startswith(stored[0].content) and stored[0].content != whole["reply"]
    wait_for(lambda: processed(api, [stored[0].id]), timeout=60, what="the turn processed")
    assert [t["role"] for t in buffer_turns(api, user, "s")] == ["user", "assistant"]
