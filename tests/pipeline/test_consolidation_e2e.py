"""A 50-turn conversation through the real chat path and a real worker, in local mode:
standalone memories, a merge, a supersession with its history, the running summary
fed by buffer eviction, and a replay of every turn and summary task that changes
nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

import memwell
from api.main import create_app
from memwell.buffer.session_buffer import summary_key
from memwell.core.settings import Settings
from memwell.db.models import ChatSession, Memory, MemoryEvent, Turn
from memwell.intake.dispatch import send_summarize
from memwell.local.waiting import broker_idle, wait_for
from memwell.local.worker_process import WorkerProcess

FILLER = ["Hi there!", "Haha, ok.", "Thanks!", "Cool.", "Sure, sounds good."]
FACTS = [
    "I live in Berlin with my partner Sam.",
    "I really enjoy hiking in the Alps.",
    "My sister Nora is a nurse in Hamburg.",
    "I am allergic to peanuts.",
    "I started learning the cello in January.",
    "My favorite book is Middlemarch.",
    "I adopted a grey cat called Pixel last year.",
    "I work as a data engineer at a logistics startup.",
    "We are planning a trip to Japan next spring.",
    "I ran my first half marathon in 2 hours and 5 minutes.",
    "My dad turns seventy in August and we are throwing a party.",
    "I volunteer at the food bank on Saturdays.",
    "I prefer window seats on long flights.",
    "I collect vinyl records from the seventies.",
    "My best friend Omar is getting married in Porto in June.",
    "I quit sugar three weeks ago and feel much better.",
    "I play five-a-side football with colleagues every Tuesday.",
    "My goal this year is to read twenty novels.",
]
PARAPHRASE = "I enjoy hiking in the Alps a lot."  # merges into the hiking memory
MOVE = "I moved to Lisbon last month."  # supersedes Berlin


@pytest.fixture(scope="module")
def small_buffer_api(
    stack_env: dict[str, str], auth_headers: dict[str, str]
) -> Iterator[TestClient]:
    settings = Settings(
        database_url=stack_env["DATABASE_URL"],
        redis_url=stack_env["REDIS_URL"],
        embedding_provider="local",
        buffer_token_budget=250,  # small, so the conversation overflows it
    )
    with TestClient(create_app(settings), headers=auth_headers) as client:
        yield client


def _status(db: sessionmaker[Session], tenant: str, turn_ids: list[str]) -> set[str]:
    with db() as session:
        rows = session.scalars(
            select(Turn.status).where(Turn.tenant == tenant, Turn.id.in_(turn_ids))
        ).all()
    return set(rows) if len(rows) == len(turn_ids) else {"missing"}


def _say(api: TestClient, ids: dict[str, str], message: str) -> list[str]:
    response = api.post(
        "/v1/chat",
        json={"user_id": ids["user"], "session_id": ids["session"], "message": message},
    )
    assert response.status_code == 200, response.text
    turn_ids: list[str] = response.json()["turn_ids"]
    return turn_ids


def test_fifty_turn_conversation(
    small_buffer_api: TestClient,
    worker: WorkerProcess,
    db: sessionmaker[Session],
    stack_env: dict[str, str],
    ids: dict[str, str],
) -> None:
    # `ids["tenant"]` is unused: the API serves the default tenant; the user is unique.
    api, tenant, user = small_buffer_api, "default", ids["user"]
    script = [FILLER[0], *FACTS[:7], FILLER[1], *FACTS[7:], FILLER[2], PARAPHRASE, FILLER[3]]
    all_ids: list[str] = []
    for message in script:
        all_ids += _say(api, ids, message)
    # The move is said once the Berlin fact is surely consolidated: order matters.
    wait_for(lambda: _status(db, tenant, all_ids) == {"processed"}, timeout=120, what="turns")
    all_ids += _say(api, ids, MOVE)
    all_ids += _say(api, ids, FILLER[4])
    assert len(all_ids) == 50
    wait_for(lambda: _status(db, tenant, all_ids) == {"processed"}, timeout=120, what="turns")
    wait_for(lambda: broker_idle(stack_env["REDIS_URL"]), timeout=120, what="summaries")

    with db() as session:
        live = {
            m.content: m
            for m in session.scalars(
                select(Memory).where(
                    Memory.tenant == tenant, Memory.user_id == user, Memory.superseded_by.is_(None)
                )
            )
        }
        old_home = session.scalars(
            select(Memory).where(Memory.user_id == user, Memory.superseded_by.is_not(None))
        ).one()
        history = session.execute(
            select(MemoryEvent.event, MemoryEvent.old_content, MemoryEvent.new_content)
            .where(MemoryEvent.memory_id == old_home.id)
            .order_by(MemoryEvent.id)
        ).all()
        merges = session.scalars(
            select(MemoryEvent).where(MemoryEvent.user_id == user, MemoryEvent.event == "merge")
        ).all()
        chat = session.get(ChatSession, (tenant, user, ids["session"]))

    # Memories: standalone sentences about "The user"; filler and assistant turns left none.
    assert "The user is allergic to peanuts." in live
    assert "The user prefers window seats on long flights." in live
    assert all("Thanks" not in c and "local recall" not in c for c in live)
    assert all(c.startswith("The user") for c in live if "Nora" not in c)

    # A merge: the paraphrase joined the hiking memory, with both turns as provenance.
    hiking = [m for c, m in live.items() if "hiking in the Alps" in c]
    assert len(hiking) == 1 and len(hiking[0].source_turn_ids) == 2
    assert len(merges) == 1 and merges[0].memory_id == hiking[0].id

    # A supersession, with history: Berlin is no longer live, Lisbon is.
    lisbon = next(m for c, m in live.items() if "Lisbon" in c)
    assert "Berlin" in old_home.content and old_home.superseded_by == lisbon.id
    assert old_home.valid_to is not None
    assert [h[0] for h in history] == ["add", "supersede"]
    assert history[1][1] == old_home.content and history[1][2] == lisbon.content

    # The running summary: evicted turns folded in, in Postgres and in the buffer's key.
    assert chat is not None and chat.summary and chat.summarized_turn_ids
    assert "Berlin" in chat.summary or "hiking" in chat.summary
    r = redis.Redis.from_url(stack_env["REDIS_URL"])
    cached = wait_for(lambda: r.get(summary_key(tenant, user, ids["session"])), timeout=30)
    assert cached.decode() == chat.summary

    # Replaying every turn and every summary task changes nothing.
    before = _snapshot_user(db, tenant, user)
    with db() as session:
        turns = session.scalars(
            select(Turn).where(Turn.tenant == tenant, Turn.user_id == user).order_by(Turn.id)
        ).all()
        replay = [
            {
                "id": t.id,
                "user_id": t.user_id,
                "session_id": t.session_id,
                "role": t.role,
                "content": t.content,
                "created_at": t.created_at,
            }
            for t in turns
        ]
    memwell.enqueue_turns(replay, tenant=tenant, broker_url=stack_env["REDIS_URL"], chunk_size=7)
    send_summarize(
        tenant=tenant,
        user_id=user,
        session_id=ids["session"],
        turn_ids=list(before["folded"]),
        broker_url=stack_env["REDIS_URL"],
    )
    wait_for(lambda: broker_idle(stack_env["REDIS_URL"]), timeout=120, what="the replay")
    assert _snapshot_user(db, tenant, user) == before
    r.close()


def _snapshot_user(db: sessionmaker[Session], tenant: str, user: str) -> dict[str, Any]:
    with db() as session:
        memories = session.execute(
            select(
                Memory.id,
                Memory.content,
                Memory.reinforcement_count,
                Memory.source_turn_ids,
                Memory.superseded_by,
                Memory.valid_to,
            )
            .where(Memory.tenant == tenant, Memory.user_id == user)
            .order_by(Memory.id)
        ).all()
        events = session.scalar(
            select(func.count()).select_from(MemoryEvent).where(MemoryEvent.user_id == user)
        )
        chat = session.scalars(select(ChatSession).where(ChatSession.user_id == user)).one()
        return {
            "memories": [tuple(m) for m in memories],
            "events": events,
            "summary": chat.summary,
            "folded": list(chat.summarized_turn_ids),
            "turns": session.scalar(
                select(func.count()).select_from(Turn).where(Turn.user_id == user)
            ),
        }


def test_a_payload_larger_than_a_batch_is_consolidated_in_full_batches(
    worker: WorkerProcess,
    db: sessionmaker[Session],
    stack_env: dict[str, str],
    ids: dict[str, str],
) -> None:
    from memwell.pipeline.stats import read_stats

    wait_for(lambda: broker_idle(stack_env["REDIS_URL"]), timeout=120, what="a quiet broker")
    r = redis.Redis.from_url(stack_env["REDIS_URL"])
    before = read_stats(r)
    turns = [
        {"user_id": ids["user"], "session_id": ids["session"],
         "content": f"I visited museum number {i} in Paris with my sister."}
        for i in range(150)
    ]  # fmt: skip
    turn_ids = memwell.enqueue_turns(
        turns, tenant=ids["tenant"], broker_url=stack_env["REDIS_URL"], chunk_size=150
    )
    wait_for(lambda: _status(db, ids["tenant"], turn_ids) == {"processed"}, timeout=120)
    wait_for(lambda: broker_idle(stack_env["REDIS_URL"]), timeout=120, what="the batches")
    after = read_stats(r)
    r.close()
    batches = after["batches"] - before.get("batches", 0)
    assert after["turns"] - before.get("turns", 0) == 150
    assert batches <= 3  # 150 turns at MEMWELL_EMBED_BATCH=64: never one turn per batch
