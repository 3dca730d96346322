"""sweep: re-dispatches turns stuck in pending once per `older_than`, never a turn that
is processed, gives up after max attempts, stands back during a backlog, reports dead
letters; two sweeps at once dispatch each turn once. Real Postgres; the clock and the
dispatcher are injected (the end-to-end path is in test_outbox.py)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import Turn
from memwell.intake.dead_letters import record_dead_letter
from memwell.intake.persist import persist_turns
from memwell.intake.turns import IngestPayload, TurnIn
from memwell.local.session_services import PostgresService
from memwell.maintenance.sweep import SweepPolicy, sweep_pending
from tests.support.maintenance_factories import isolated_database

POLICY = SweepPolicy(older_than=timedelta(minutes=5), max_attempts=2, chunk=4)


@pytest.fixture
def mdb(postgres: PostgresService) -> Iterator[sessionmaker[Session]]:
    with isolated_database(postgres, f"memwell_test_sweep_{uuid.uuid4().hex[:8]}") as sessions:
        yield sessions


class Collector:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.lock = threading.Lock()

    def __call__(self, tenant: str, turn_ids: list[str]) -> None:
        with self.lock:
            self.calls.append((tenant, turn_ids))

    def ids(self) -> list[str]:
        return [i for _, ids in self.calls for i in ids]


def _persist(sessions: sessionmaker[Session], tenant: str, n: int) -> tuple[list[str], datetime]:
    turns = [TurnIn(user_id="u", session_id="s", content=f"turn {i}") for i in range(n)]
    with sessions.begin() as s:
        persist_turns(s, IngestPayload(tenant=tenant, turns=turns))
        received = s.scalar(select(Turn.received_at).where(Turn.tenant == tenant).limit(1))
    assert received is not None
    return [t.id for t in turns], received


def _sweep(sessions: sessionmaker[Session], now: datetime, dispatch: Collector, **kw: object):  # type: ignore[no-untyped-def]
    return sweep_pending(
        sessions, now=now, policy=POLICY, dispatch=dispatch, batch_size=5, max_batches=100,
        **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_stuck_turns_are_redispatched_once_per_interval(mdb: sessionmaker[Session]) -> None:
    ids, t0 = _persist(mdb, "a", 9)
    done, _ = _persist(mdb, "b", 2)
    with mdb.begin() as s:
        s.execute(update(Turn).where(Turn.tenant == "b").values(status="processed"))

    early = Collector()
    assert _sweep(mdb, t0 + timedelta(minutes=1), early).counts["redispatched"] == 0
    assert early.calls == []

    first = Collector()
    now = t0 + timedelta(minutes=6)
    dry = _sweep(mdb, now, first, dry_run=True)
    assert dry.counts["redispatched"] == 9 and first.calls == []  # dry: nothing sent

    report = _sweep(mdb, now, first)
    assert report.counts["redispatched"] == 9
    assert sorted(first.ids()) == sorted(ids)
    assert all(t == "a" and len(c) <= POLICY.chunk for t, c in first.calls)

    same_minute = Collector()
    assert _sweep(mdb, now, same_minute).counts["redispatched"] == 0

    later = Collector()
    assert _sweep(mdb, now + timedelta(minutes=6), later).counts["redispatched"] == 9

    give_up = Collector()
    final = _sweep(mdb, now + timedelta(minutes=12), give_up)
    assert final.counts == {**final.counts, "redispatched": 0, "gave_up": 9}
    with mdb() as s:
        statuses = set(s.scalars(select(Turn.status).where(Turn.tenant == "a")).all())
        errors = set(s.scalars(select(Turn.error).where(Turn.tenant == "a")).all())
    assert statuses == {"failed"}
    assert errors == {"sweep: still pending after 2 re-dispatches"}


def test_backlog_holds_the_sweeper_back(mdb: sessionmaker[Session]) -> None:
    _, t0 = _persist(mdb, "a", 3)
    sent = Collector()
    report = _sweep(mdb, t0 + timedelta(hours=1), sent, backlog=500, backlog_threshold=100)
    assert report.counts["skipped_backlog"] == 500 and sent.calls == []


def test_dead_letters_are_reported(mdb: sessionmaker[Session]) -> None:
    _, t0 = _persist(mdb, "a", 1)
    with mdb.begin() as s:
        record_dead_letter(s, task_name="memwell.ingest_turns", payload={}, error="boom")
        record_dead_letter(s, task_name="memwell.consolidate_turns", payload={}, error="boom")
    report = _sweep(mdb, t0, Collector(), report_since=t0 - timedelta(hours=1))
    assert report.counts["dead_letters_open"] == 2 and report.counts["dead_letters_new"] == 2
    future = _sweep(mdb, t0, Collector(), report_since=datetime.now(UTC) + timedelta(hours=1))
    assert future.counts["dead_letters_new"] == 0


def test_two_concurrent_sweeps_dispatch_each_turn_once(mdb: sessionmaker[Session]) -> None:
    ids, t0 = _persist(mdb, "race", 300)
    now = t0 + timedelta(minutes=10)
    collectors = [Collector(), Collector()]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def go(c: Collector) -> None:
        try:
            barrier.wait()
            _sweep(mdb, now, c)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(c,)) for c in collectors]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not errors
    a, b = (c.ids() for c in collectors)
    assert sorted(a + b) == sorted(ids)  # each turn exactly once across both sweeps
    assert not set(a) & set(b)


def test_backlog_counts_every_queue_consolidation_runs_on(redis_url: str) -> None:
    """In LLM mode consolidation waits on the llm queue: the sweeper must see it, or it
    re-sends turns that are only queued. (A separate database: no worker consumes it.)"""
    import redis as redis_lib

    from memwell.maintenance.jobs import consolidation_backlog

    client = redis_lib.Redis.from_url(redis_url.rstrip("/") + "/9")
    try:
        client.flushdb()
        client.lpush("llm", b"m1", b"m2")
        client.lpush("embed", b"m3")
        client.lpush("maintenance", b"not a turn")
        assert consolidation_backlog(client) == 3
    finally:
        client.flushdb()
        client.close()
