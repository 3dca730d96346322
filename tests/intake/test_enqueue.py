"""enqueue_turn / enqueue_turns: broker only, idempotent on the client turn id."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.db.models import ChatSession, Memory, MemoryEvent, Turn
from memwell.local.waiting import broker_idle, wait_for
from memwell.local.worker_process import WorkerProcess


def _turn_status(db: sessionmaker[Session], tenant: str, turn_id: str) -> str | None:
    with db() as session:
        return session.scalar(select(Turn.status).where(Turn.tenant == tenant, Turn.id == turn_id))


def test_same_turn_id_twice_gives_one_turn_and_one_memory(
    stack_env: dict[str, str], worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    tenant = ids["tenant"]
    kwargs = dict(
        user_id=ids["user"],
        session_id=ids["session"],
        content="I am allergic to peanuts.",
        turn_id="client-key-1",
        tenant=tenant,
    )
    first = memwell.enqueue_turn(**kwargs)  # type: ignore[arg-type]
    second = memwell.enqueue_turn(**kwargs)  # type: ignore[arg-type]
    assert first == second == "client-key-1"

    marker = memwell.enqueue_turn(
        user_id=ids["user"], session_id=ids["session"], content="marker", tenant=tenant
    )
    wait_for(lambda: _turn_status(db, tenant, marker) == "processed", timeout=60)
    wait_for(lambda: broker_idle(stack_env["REDIS_URL"]), timeout=60, what="both copies consumed")

    with db() as session:
        turns = session.scalar(
            select(func.count()).select_from(Turn).where(Turn.tenant == tenant, Turn.id == first)
        )
        memories = session.scalars(select(Memory).where(Memory.tenant == tenant)).all()
        chat_session = session.get(ChatSession, (tenant, ids["user"], ids["session"]))
    assert turns == 1
    # The memory is the turn made standalone; "marker" is filler and leaves none.
    assert [m.content for m in memories] == ["The user is allergic to peanuts."]
    assert memories[0].source_turn_ids == [first]
    assert chat_session is not None and chat_session.turn_count == 2  # the turn and the marker


def test_event_time_is_kept_and_batches_arrive(
    stack_env: dict[str, str], worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    tenant = ids["tenant"]
    said_at = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    turn_ids = memwell.enqueue_turns(
        [
            {
                "user_id": ids["user"],
                "session_id": "s1",
                "content": f"I visited museum number {i} in Paris with my sister.",
                "created_at": said_at,
            }
            for i in range(7)
        ],
        tenant=tenant,
        chunk_size=3,
    )
    assert len(set(turn_ids)) == 7
    wait_for(lambda: all(_turn_status(db, tenant, t) == "processed" for t in turn_ids), timeout=60)
    with db() as session:
        times = session.scalars(select(Memory.created_at).where(Memory.tenant == tenant)).all()
        events = session.scalar(
            select(func.count()).select_from(MemoryEvent).where(MemoryEvent.tenant == tenant)
        )
    assert sorted(times) == [said_at] * 7
    assert events == 7


def test_exact_duplicate_content_reinforces_instead_of_adding(
    stack_env: dict[str, str], worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    tenant = ids["tenant"]
    a = memwell.enqueue_turn(
        user_id=ids["user"], session_id="s", content="I love hiking.", tenant=tenant
    )
    wait_for(lambda: _turn_status(db, tenant, a) == "processed", timeout=60)
    b = memwell.enqueue_turn(
        user_id=ids["user"], session_id="s", content="  i LOVE hiking ", tenant=tenant
    )
    wait_for(lambda: _turn_status(db, tenant, b) == "processed", timeout=60)
    with db() as session:
        memory = session.scalars(select(Memory).where(Memory.tenant == tenant)).one()
        kinds = session.scalars(
            select(MemoryEvent.event)
            .where(MemoryEvent.memory_id == memory.id)
            .order_by(MemoryEvent.id)
        ).all()
    assert memory.reinforcement_count == 1
    assert sorted(memory.source_turn_ids) == sorted([a, b])
    assert kinds == ["add", "reinforce"]


def test_invalid_turn_is_refused_before_anything_is_sent(stack_env: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        memwell.enqueue_turns(
            [
                {"user_id": "u", "session_id": "s", "content": "fine"},
                {"user_id": "u", "session_id": "s", "content": "bad\x00nul"},
            ]
        )


# Nothing listens here: a test passes only if nothing was sent.
UNREACHABLE_BROKER = "redis://127.0.0.1:1/0"


def test_a_bad_turn_is_named_by_its_index_in_the_whole_batch() -> None:
    turns = [{"user_id": "u", "session_id": "s", "content": f"fine {i}"} for i in range(5)]
    turns[3]["content"] = "bad\x00nul"
    with pytest.raises(ValidationError) as caught:
        memwell.enqueue_turns(turns, tenant="t", broker_url=UNREACHABLE_BROKER, chunk_size=2)
    assert [e["loc"] for e in caught.value.errors()] == [(3, "content")]
    assert "NUL" in str(caught.value)


def test_an_empty_batch_sends_nothing() -> None:
    assert memwell.enqueue_turns([], tenant="t", broker_url=UNREACHABLE_BROKER) == []
