"""close-idle: an idle session gets an extractive summary, its Redis buffer flushed and
status closed; active sessions and sessions with fresh buffered turns stay open; a
new turn reopens a closed session. Real Postgres and Redis; the clock is injected."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from memwell.buffer.session_buffer import SyncSessionBuffer
from memwell.db.models import ChatSession, Turn
from memwell.intake.persist import persist_turns
from memwell.intake.turns import IngestPayload, TurnIn
from memwell.llm.provider_rate_limit import RateLimited
from memwell.local.session_services import PostgresService
from memwell.maintenance.sessions import close_idle_sessions, summarize_and_close
from tests.support.maintenance_factories import isolated_database

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
IDLE = timedelta(minutes=30)


@pytest.fixture
def mdb(postgres: PostgresService) -> Iterator[sessionmaker[Session]]:
    with isolated_database(postgres, f"memwell_test_idle_{uuid.uuid4().hex[:8]}") as sessions:
        yield sessions


@pytest.fixture
def buffer(redis_url: str) -> Iterator[SyncSessionBuffer]:
    client = redis.Redis.from_url(redis_url)
    yield SyncSessionBuffer(client, token_budget=2000, ttl_s=3600)
    client.close()


def _say(
    sessions: sessionmaker[Session],
    buffer: SyncSessionBuffer,
    tenant: str,
    session_id: str,
    lines: list[tuple[str, float, datetime]],
) -> None:
    """Persist turns (content, importance, time) and put them in the session buffer."""
    turns = [
        TurnIn(id=uuid.uuid4().hex, user_id="u", session_id=session_id, content=c, created_at=at)
        for c, _, at in lines
    ]
    with sessions.begin() as s:
        persist_turns(s, IngestPayload(tenant=tenant, turns=turns))
        for turn, (_, importance, _) in zip(turns, lines, strict=True):
            s.execute(
                update(Turn)
                .where(Turn.tenant == tenant, Turn.id == turn.id)
                .values(importance=importance)
            )
    buffer.append(
        tenant,
        "u",
        session_id,
        [
            buffer.make_turn(
                turn_id=t.id, role="user", content=t.content, created_at=at.isoformat()
            )
            for t, (_, _, at) in zip(turns, lines, strict=True)
        ],
    )


def _session(sessions: sessionmaker[Session], tenant: str, sid: str) -> ChatSession:
    with sessions() as s:
        row = s.get(ChatSession, (tenant, "u", sid))
    assert row is not None
    return row


def test_idle_session_is_summarized_flushed_and_closed(
    mdb: sessionmaker[Session], buffer: SyncSessionBuffer, ids: dict[str, str]
) -> None:
    tenant = ids["tenant"]
    _say(mdb, buffer, tenant, "idle", [
        ("I live in Porto.", 0.9, T0),
        ("ok", 0.1, T0 + timedelta(minutes=1)),
        ("My sister is called Ines.", 0.8, T0 + timedelta(minutes=2)),
    ])  # fmt: skip
    _say(mdb, buffer, tenant, "active", [("still here", 0.5, T0 + timedelta(minutes=50))])
    now = T0 + timedelta(minutes=60)

    dry = close_idle_sessions(
        mdb, now=now, idle=IDLE, buffer=buffer, batch_size=10, max_batches=10, dry_run=True
    )
    assert dry.counts["closed"] == 1
    assert _session(mdb, tenant, "idle").status == "open"
    assert len(buffer.read(tenant, "u", "idle").turns) == 3

    report = close_idle_sessions(
        mdb, now=now, idle=IDLE, buffer=buffer, batch_size=10, max_batches=10
    )
    assert report.counts["closed"] == 1
    closed = _session(mdb, tenant, "idle")
    assert closed.status == "closed" and closed.closed_at == now
    assert closed.summary is not None
    lines = closed.summary.splitlines()
    assert lines[0] == "- I live in Porto." and lines[-1] == "- My sister is called Ines."
    assert buffer.read(tenant, "u", "idle").turns == []
    assert _session(mdb, tenant, "active").status == "open"
    assert len(buffer.read(tenant, "u", "active").turns) == 1

    again = close_idle_sessions(
        mdb, now=now, idle=IDLE, buffer=buffer, batch_size=10, max_batches=10
    )
    assert again.counts["closed"] == 0

    _say(mdb, buffer, tenant, "idle", [("I am back.", 0.5, now)])
    assert _session(mdb, tenant, "idle").status == "open"


def test_fresh_buffered_turn_keeps_a_session_open(
    mdb: sessionmaker[Session], buffer: SyncSessionBuffer, ids: dict[str, str]
) -> None:
    tenant = ids["tenant"]
    _say(mdb, buffer, tenant, "s", [("hello", 0.5, T0)])
    now = T0 + timedelta(minutes=45)
    # A turn the chat path buffered a minute ago, not yet persisted by a worker.
    buffer.append(
        tenant,
        "u",
        "s",
        [
            buffer.make_turn(
                turn_id="x",
                role="user",
                content="new",
                created_at=(now - timedelta(minutes=1)).isoformat(),
            )
        ],
    )
    report = close_idle_sessions(
        mdb, now=now, idle=IDLE, buffer=buffer, batch_size=10, max_batches=10
    )
    assert report.counts == {"closed": 0, "left_open_active_buffer": 1}
    assert _session(mdb, tenant, "s").status == "open"
    assert len(buffer.read(tenant, "u", "s").turns) == 2


def _four_idle_sessions(
    mdb: sessionmaker[Session], buffer: SyncSessionBuffer, tenant: str
) -> list[str]:
    names = [f"s{i}" for i in range(4)]
    for i, sid in enumerate(names):
        _say(mdb, buffer, tenant, sid, [(f"I live in town {i}.", 0.9, T0 + timedelta(seconds=i))])
    return names


def test_a_spent_model_budget_keeps_what_is_closed_and_leaves_the_rest_for_the_next_tick(
    mdb: sessionmaker[Session], buffer: SyncSessionBuffer, ids: dict[str, str]
) -> None:
    """A summary that hits the shared rate limit stops the batch: the sessions closed
    before it stay closed (not rolled back with it), the rest stay open, and the walk
    ends for this run rather than retrying the whole batch."""
    tenant = ids["tenant"]
    names = _four_idle_sessions(mdb, buffer, tenant)
    calls: list[str] = []

    def summarize(session: Session, **key: object) -> str:
        calls.append(str(key["session_id"]))
        if len(calls) == 3:
            # half done when the budget runs out: the savepoint takes this back
            session.execute(
                update(ChatSession)
                .where(ChatSession.tenant == tenant, ChatSession.id == key["session_id"])
                .values(summary="half written")
            )
            raise RateLimited("the shared model budget is spent")
        return summarize_and_close(session, **key)  # type: ignore[arg-type]

    now = T0 + timedelta(minutes=60)
    report = close_idle_sessions(
        mdb, now=now, idle=IDLE, buffer=buffer, batch_size=10, max_batches=10,
        summarize=summarize,
    )  # fmt: skip
    assert report.counts == {"closed": 2, "left_open_active_buffer": 0, "left_open_rate_limited": 2}
    assert report.finished and report.batches == 1
    assert [_session(mdb, tenant, sid).status for sid in names] == [
        "closed", "closed", "open", "open",
    ]  # fmt: skip
    assert _session(mdb, tenant, names[2]).summary is None
    assert buffer.read(tenant, "u", names[0]).turns == []  # flushed after the commit
    assert len(buffer.read(tenant, "u", names[2]).turns) == 1

    later = close_idle_sessions(
        mdb, now=now, idle=IDLE, buffer=buffer, batch_size=10, max_batches=10
    )
    assert later.counts["closed"] == 2
    assert {_session(mdb, tenant, sid).status for sid in names} == {"closed"}


def test_a_spent_task_time_stops_with_a_cursor_the_next_task_continues_from(
    mdb: sessionmaker[Session], buffer: SyncSessionBuffer, ids: dict[str, str]
) -> None:
    tenant = ids["tenant"]
    names = _four_idle_sessions(mdb, buffer, tenant)
    now = T0 + timedelta(minutes=60)
    out_of_time = close_idle_sessions(
        mdb, now=now, idle=IDLE, buffer=buffer, batch_size=10, max_batches=10,
        deadline=time.monotonic() - 1,
    )  # fmt: skip
    assert out_of_time.counts == {
        "closed": 0, "left_open_active_buffer": 0, "left_open_out_of_time": 4,
    }  # fmt: skip
    assert not out_of_time.finished and out_of_time.batches == 1
    resumed = close_idle_sessions(
        mdb, now=now, idle=IDLE, buffer=buffer, batch_size=10, max_batches=10,
        cursor=out_of_time.cursor,
    )  # fmt: skip
    assert resumed.counts["closed"] == 4 and resumed.finished
    assert {_session(mdb, tenant, sid).status for sid in names} == {"closed"}
