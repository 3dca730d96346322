"""One user's turns consolidated by many real worker processes at once.

Every turn gets its own consolidate task, all sent together (last turn first), to a
worker with four pool processes on its own broker database. Whatever order the
processes pick them in, the store must end as if the turns were applied one by one:
one memory per fact with its history, a changed fact superseded exactly once, and a
run of changes applied in the order the turns arrived.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import Memory, MemoryEvent, Turn
from memwell.intake.dispatch import send_consolidate
from memwell.intake.persist import persist_turns
from memwell.intake.turns import IngestPayload, TurnIn
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess

PROCESSES = 4


@pytest.fixture(scope="module")
def broker(stack_env: dict[str, str]) -> Iterator[str]:
    # Its own broker database: only this module's worker processes take these tasks.
    env = dict(stack_env)
    env["REDIS_URL"] = urlsplit(stack_env["REDIS_URL"])._replace(path="/6").geturl()
    process = WorkerProcess(env, concurrency=PROCESSES, name="scale", queues="embed")
    process.start()
    yield env["REDIS_URL"]
    process.stop()


def _send_all_at_once(
    db: sessionmaker[Session], broker: str, ids: dict[str, str], contents: list[str]
) -> list[str]:
    """Store the turns in order, then one consolidate task per turn, last turn first."""
    turns = [
        TurnIn(id=f"{ids['user']}-{i:02d}", user_id=ids["user"], session_id=ids["session"],
               content=text)
        for i, text in enumerate(contents)
    ]  # fmt: skip
    with db.begin() as session:
        persist_turns(session, IngestPayload(tenant=ids["tenant"], turns=turns))
    for turn in reversed(turns):
        send_consolidate(ids["tenant"], [turn.id], broker_url=broker)

    def settled() -> bool:
        with db() as session:
            pending = session.scalar(
                select(func.count())
                .select_from(Turn)
                .where(Turn.tenant == ids["tenant"], Turn.status == "pending")
            )
        return pending == 0

    wait_for(settled, timeout=120, interval=0.1, what="every turn consolidated")
    with db() as session:
        statuses = session.scalars(select(Turn.status).where(Turn.tenant == ids["tenant"]))
        assert set(statuses) == {"processed"}
    return [t.id for t in turns]


def _memories(db: sessionmaker[Session], tenant: str) -> list[Memory]:
    with db() as session:
        return list(session.scalars(select(Memory).where(Memory.tenant == tenant)))


def _events(db: sessionmaker[Session], tenant: str) -> list[MemoryEvent]:
    with db() as session:
        return list(
            session.scalars(
                select(MemoryEvent).where(MemoryEvent.tenant == tenant).order_by(MemoryEvent.id)
            )
        )


def test_paraphrases_sent_to_many_workers_at_once_end_as_one_memory_with_history(
    db: sessionmaker[Session], broker: str, ids: dict[str, str]
) -> None:
    contents = [
        "I really enjoy hiking in the Alps.",
        "I enjoy hiking in the Alps.",
        "I really enjoy hiking in the Alps!",
        "I really enjoy hiking in the Alps.",
        "I enjoy hiking in the Alps a lot.",
        "I enjoy hiking in the Alps.",
    ] * 2
    turn_ids = _send_all_at_once(db, broker, ids, contents)
    memories = _memories(db, ids["tenant"])
    assert len(memories) == 1, [m.content for m in memories]
    (memory,) = memories
    assert memory.deleted_at is None and memory.superseded_by is None
    assert sorted(memory.source_turn_ids) == sorted(turn_ids)
    events = _events(db, ids["tenant"])
    assert events[0].event == "add"
    assert {e.event for e in events[1:]} <= {"merge", "reinforce"}
    assert len(events) == len(contents)  # one history entry per turn
    assert {e.memory_id for e in events} == {memory.id}


def test_a_changed_fact_supersedes_exactly_once(
    db: sessionmaker[Session], broker: str, ids: dict[str, str]
) -> None:
    contents = ["I live in Berlin."] * 5 + ["I moved to Lisbon."] * 5
    _send_all_at_once(db, broker, ids, contents)
    memories = _memories(db, ids["tenant"])
    live = [m for m in memories if m.superseded_by is None and m.deleted_at is None]
    old = [m for m in memories if m.superseded_by is not None]
    assert [m.content for m in live] == ["The user moved to Lisbon."], [m.content for m in memories]
    assert len(old) == 1 and "Berlin" in old[0].content
    assert old[0].superseded_by == live[0].id
    events = _events(db, ids["tenant"])
    assert [e.event for e in events].count("supersede") == 1
    assert [e.event for e in events].count("add") == 2


def _colour(memory: Memory) -> str:
    return memory.content.rstrip(".").rsplit(" ", 1)[-1]


def test_a_users_turns_apply_in_the_order_they_arrived(
    db: sessionmaker[Session], broker: str, ids: dict[str, str]
) -> None:
    colours = ["blue", "green", "red", "yellow", "purple", "orange", "black", "white"]
    _send_all_at_once(db, broker, ids, [f"My favourite colour is {c}." for c in colours])
    by_id = {m.id: m for m in _memories(db, ids["tenant"])}
    live = [m for m in by_id.values() if m.superseded_by is None]
    assert [_colour(m) for m in live] == ["white"]
    # Walk the supersession chain from the first colour: it must follow arrival order.
    (first,) = [m for m in by_id.values() if "blue" in m.content]
    chain = [_colour(first)]
    node = first
    while node.superseded_by is not None:
        node = by_id[node.superseded_by]
        chain.append(_colour(node))
    assert chain == colours
