"""What a client clears stays cleared: a whole session, with the turns of its last
exchanges still on their way to Postgres, and named turns that sit in the session's
Redis buffer (and so in the model's context)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import ChatSession, Memory
from memwell.local.waiting import broker_idle, wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.fake_openai import FakeOpenAI


def _client(door: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=door, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def _chat(mw: httpx.Client, user: str, session_id: str, message: str) -> list[str]:
    response = mw.post(
        "/v1/chat", json={"user_id": user, "session_id": session_id, "message": message}
    )
    assert response.status_code == 200, response.text
    turn_ids: list[str] = response.json()["turn_ids"]
    return turn_ids


def _transcript(mw: httpx.Client, user: str, session_id: str) -> list[dict[str, Any]]:
    response = mw.get("/v1/turns", params={"user_id": user, "session_id": session_id})
    assert response.status_code == 200, response.text
    turns: list[dict[str, Any]] = response.json()["turns"]
    return turns


def _status(mw: httpx.Client, turn_id: str) -> dict[str, Any]:
    body: dict[str, Any] = mw.get(f"/v1/turns/{turn_id}").json()
    return body


def test_turns_in_flight_when_a_session_is_cleared_are_dropped_and_it_stays_cleared(
    door: str, fake_openai: FakeOpenAI, tenant_key: str, ids: dict[str, str],
    db: sessionmaker[Session], worker: WorkerProcess, stack_env: dict[str, str],
) -> None:  # fmt: skip
    tenant, user, sid = ids["tenant"], ids["user"], ids["session"]
    fake_openai.reset()
    # No worker consumes while the exchanges are acknowledged and the session cleared:
    # their turns wait on the broker, as they do behind a busy worker.
    worker.stop()
    try:
        with _client(door, tenant_key) as mw:
            _chat(mw, user, sid, "I keep bees on a roof in Porto.")
            door_reply = mw.post(
                "/v1/chat/completions",
                json={"model": "m", "user": user,
                      "messages": [{"role": "user", "content": "My bees are Italian."}]},
                headers={"X-Memwell-Session": sid},
            )  # fmt: skip
            assert door_reply.status_code == 200, door_reply.text
            before = [t["turn_id"] for t in _transcript(mw, user, sid)]
            assert len(before) == 4

            cleared = mw.delete("/v1/turns", params={"user_id": user, "session_id": sid})
            assert cleared.status_code == 200, cleared.text
            assert cleared.json()["counts"]["turns_in_flight"] == 4
            assert _transcript(mw, user, sid) == []
            # The session is reused at once: what is sent after the clear is kept.
            after = _chat(mw, user, sid, "I started a second hive in Braga.")
    finally:
        worker.start()

    wait_for(lambda: broker_idle(stack_env["REDIS_URL"]), timeout=60, what="queues to drain")
    with _client(door, tenant_key) as mw:
        wait_for(lambda: all(_status(mw, t)["status"] == "processed" for t in after), timeout=60)
        assert [t["turn_id"] for t in _transcript(mw, user, sid)] == after
        for turn_id in before:
            assert _status(mw, turn_id) == {
                "id": turn_id, "status": "dropped", "reason": "session cleared",
                "user_id": None, "session_id": None, "processed_at": None,
            }  # fmt: skip
    with db() as s:
        row = s.scalars(
            select(ChatSession).where(ChatSession.tenant == tenant, ChatSession.user_id == user)
        ).one()
        sources = s.scalars(
            select(Memory.source_turn_ids).where(Memory.tenant == tenant, Memory.user_id == user)
        ).all()
    assert row.turn_count == 2  # only the exchange after the clear
    assert not {t for ids_ in sources for t in ids_} & set(before)


def test_deleted_turns_leave_the_buffer_and_the_next_context(
    door: str, fake_openai: FakeOpenAI, tenant_key: str, ids: dict[str, str],
    worker: WorkerProcess, stack_env: dict[str, str],
) -> None:  # fmt: skip
    user, sid = ids["user"], ids["session"]
    fake_openai.reset()
    with _client(door, tenant_key) as mw:
        doomed = _chat(mw, user, sid, "My locker code is 4471.")
        kept = _chat(mw, user, sid, "I like green tea.")
        tokens_before = _buffer_tokens(mw, user, sid)

        deleted = mw.delete(
            "/v1/turns", params={"user_id": user, "session_id": sid, "turn_id": doomed}
        )
        assert deleted.status_code == 200, deleted.text
        assert deleted.json()["counts"]["buffered_turns"] == 2
        assert [t["turn_id"] for t in _transcript(mw, user, sid)] == kept
        assert 0 < _buffer_tokens(mw, user, sid) < tokens_before

        context = mw.post(
            "/v1/context", json={"user_id": user, "session_id": sid, "query": "locker"}
        ).json()
        assert [t["turn_id"] for t in context["recent"]] == kept
        fake_openai.reset()
        _chat(mw, user, sid, "What did I tell you?")
        sent = json.dumps(fake_openai.chat_requests[-1].json["messages"])
        assert "4471" not in sent and "I like green tea." in sent

        # They stay gone when the turns on their way land.
        wait_for(lambda: broker_idle(stack_env["REDIS_URL"]), timeout=60, what="queues to drain")
        shown = {t["turn_id"] for t in _transcript(mw, user, sid)}
        assert shown.isdisjoint(doomed) and set(kept) <= shown


def _buffer_tokens(mw: httpx.Client, user: str, session_id: str) -> int:
    detail = mw.get(f"/v1/sessions/{session_id}", params={"user_id": user}).json()
    tokens: int = detail["buffer"]["total_tokens"]
    return tokens
