"""/v1/context's recent turns come from every writer: turns sent through POST /v1/turns
(never in the Redis buffer) are read from Postgres; chat turns, in both stores, appear
once. The merge rule itself is a plain function, tested without services."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient

from memwell.buffer.session_buffer import BufferedTurn, BufferSnapshot
from memwell.chat.stored_turns import StoredTurn, merge_recent
from memwell.core.tokens import count_tokens
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def _stored(api: TestClient, turn_ids: list[str]) -> bool:
    return all(api.get(f"/v1/turns/{t}").json()["status"] != "unknown" for t in turn_ids)


def _context(api: TestClient, user: str, session: str, **extra: object) -> dict[str, object]:
    body = {"user_id": user, "session_id": session, "query": "what did we say?", **extra}
    r = api.post("/v1/context", json=body)
    assert r.status_code == 200, r.text
    result: dict[str, object] = r.json()
    return result


def test_turns_sent_through_post_turns_are_recent(
    api: TestClient, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    user, session = ids["user"], ids["session"]
    said = [f"Turn {i}: the blue kayak is moored at pier {i}. " * 3 for i in range(6)]
    turns = [
        {"id": f"{session}-{i}", "user_id": user, "session_id": session, "content": text,
         "role": "user" if i % 2 == 0 else "assistant",
         "created_at": (T0 + timedelta(minutes=i)).isoformat()}
        for i, text in enumerate(said)
    ]  # fmt: skip
    # Sent newest first: the order in the context is the event time, not arrival.
    assert api.post("/v1/turns", json={"turns": turns[::-1]}).status_code == 202
    wait_for(lambda: _stored(api, [t["id"] for t in turns]), timeout=60, what="turns stored")

    full = _context(api, user, session)
    recent = full["recent"]
    assert isinstance(recent, list)
    assert [t["turn_id"] for t in recent] == [t["id"] for t in turns]
    assert [t["content"] for t in recent] == said
    assert all(t["tokens"] == count_tokens(t["content"]) for t in recent)
    messages = full["messages"]
    assert isinstance(messages, list)
    assert [m["content"] for m in messages[1:-1]] == said

    budget = 100 + sum(t["tokens"] for t in recent[-2:])
    tight = _context(api, user, session, token_budget=budget)
    kept = tight["recent"]
    assert isinstance(kept, list) and isinstance(tight["tokens"], int)
    assert tight["tokens"] <= budget
    assert 0 < len(kept) < len(turns), "the budget keeps the newest turns, not all"
    assert [t["turn_id"] for t in kept] == [t["id"] for t in turns][-len(kept) :]


def test_chat_turns_appear_once(
    api: TestClient, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    user, session = ids["user"], ids["session"]
    chat_ids: list[str] = []
    for message in ("My canoe is green.", "It is moored at the old mill."):
        r = api.post("/v1/chat", json={"user_id": user, "session_id": session, "message": message})
        assert r.status_code == 200, r.text
        chat_ids += r.json()["turn_ids"]
    # Both stores now hold the chat turns: the buffer and the turns table.
    wait_for(lambda: _stored(api, chat_ids), timeout=60, what="chat turns stored")

    recent = _context(api, user, session)["recent"]
    assert isinstance(recent, list)
    assert [t["turn_id"] for t in recent] == chat_ids
    assert [t["role"] for t in recent] == ["user", "assistant", "user", "assistant"]


def _turn(turn_id: str, minute: int) -> BufferedTurn:
    return BufferedTurn(
        turn_id=turn_id, role="user", content=turn_id, tokens=1,
        created_at=(T0 + timedelta(minutes=minute)).isoformat(),
    )  # fmt: skip


def _row(turn_id: str, minute: int, seq: int) -> StoredTurn:
    turn = _turn(turn_id, minute)
    return StoredTurn(turn=turn, at=T0 + timedelta(minutes=minute), seq=seq)


def test_merge_keeps_each_turn_once_in_event_order() -> None:
    buffered = [_turn("c", 2), _turn("d", 2), _turn("e", 3)]  # "e" not stored yet
    stored = [_row("a", 0, 1), _row("b", 1, 2), _row("c", 2, 3), _row("d", 2, 4)]
    snapshot = BufferSnapshot(turns=buffered, total_tokens=3, summary=None)
    merged = merge_recent(snapshot, stored)
    assert [t.turn_id for t in merged] == ["a", "b", "c", "d", "e"]
    assert merged[2] is buffered[0], "the buffer's copy wins"


def test_with_a_summary_turns_older_than_the_buffer_stay_out() -> None:
    # The buffer evicted "a" and "b" into the summary; "x" came through POST /v1/turns
    # after the buffer's oldest turn and is missing from it.
    buffered = [_turn("c", 2), _turn("e", 4)]
    stored = [_row("a", 0, 1), _row("b", 1, 2), _row("c", 2, 3), _row("x", 3, 4)]
    snapshot = BufferSnapshot(turns=buffered, total_tokens=2, summary="- older things")
    assert [t.turn_id for t in merge_recent(snapshot, stored)] == ["c", "x", "e"]
    # No buffer at all (a Redis restart): the stored turns are all there is.
    empty = BufferSnapshot(turns=[], total_tokens=0, summary=None)
    assert [t.turn_id for t in merge_recent(empty, stored)] == ["a", "b", "c", "x"]
