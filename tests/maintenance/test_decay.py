"""decay: strength follows the documented formula, at the injected clock; reruns are
no-ops; batches are bounded and resumable; pinned and dead rows are left alone."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import Memory
from memwell.local.session_services import PostgresService
from memwell.maintenance.decay import decay_memories
from memwell.maintenance.retention import RetentionPolicy, strength
from tests.support.maintenance_factories import add_memory, isolated_database

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = RetentionPolicy()


@pytest.fixture(scope="module")
def mdb(postgres: PostgresService) -> Iterator[sessionmaker[Session]]:
    with isolated_database(postgres, "memwell_test_decay") as sessions:
        yield sessions


def _strengths(sessions: sessionmaker[Session], tenant: str) -> dict[str, float]:
    with sessions() as s:
        return dict(
            s.execute(select(Memory.content, Memory.strength).where(Memory.tenant == tenant)).all()
        )


def test_formula_defaults_match_the_documented_half_lives() -> None:
    assert strength(POLICY, age_days=7, importance=0.0, uses=0) == pytest.approx(0.5)
    assert strength(POLICY, age_days=21, importance=0.5, uses=0) == pytest.approx(0.5)
    assert strength(POLICY, age_days=35, importance=1.0, uses=0) == pytest.approx(0.5)
    used = strength(POLICY, age_days=21, importance=0.5, uses=3)
    assert used == pytest.approx(2 ** (-1 / (1 + math.log(4))))
    assert strength(POLICY, age_days=0, importance=0.5, uses=0) == 1.0
    assert strength(POLICY, age_days=-5, importance=0.5, uses=0) == 1.0  # clock skew


def test_decay_stores_the_formula_at_the_injected_clock(mdb: sessionmaker[Session]) -> None:
    tenant = "decay-formula"
    add_memory(mdb, tenant=tenant, content="plain", at=T0)
    add_memory(mdb, tenant=tenant, content="trivial", at=T0, importance=0.0)
    add_memory(mdb, tenant=tenant, content="used", at=T0, access_count=2, reinforcement_count=1)
    add_memory(
        mdb, tenant=tenant, content="read lately", at=T0, last_accessed_at=T0 + timedelta(days=20)
    )
    add_memory(mdb, tenant=tenant, content="pinned", at=T0, pinned=True)
    add_memory(mdb, tenant=tenant, content="tombstone", at=T0, deleted_at=T0)
    now = T0 + timedelta(days=21)

    dry = decay_memories(mdb, now=now, policy=POLICY, batch_size=100, max_batches=10, dry_run=True)
    assert dry.counts["updated"] >= 4
    assert _strengths(mdb, tenant)["plain"] == 1.0  # a dry run writes nothing

    report = decay_memories(mdb, now=now, policy=POLICY, batch_size=100, max_batches=10)
    got = _strengths(mdb, tenant)
    assert got["plain"] == pytest.approx(0.5, abs=1e-6)
    assert got["trivial"] == pytest.approx(strength(POLICY, age_days=21, importance=0, uses=0))
    assert got["used"] == pytest.approx(strength(POLICY, age_days=21, importance=0.5, uses=3))
    assert got["read lately"] == pytest.approx(strength(POLICY, age_days=1, importance=0.5, uses=0))
    assert got["pinned"] == 1.0 and got["tombstone"] == 1.0
    assert report.finished and report.counts["updated"] == dry.counts["updated"]

    again = decay_memories(mdb, now=now, policy=POLICY, batch_size=100, max_batches=10)
    assert again.counts["updated"] == 0  # same clock, same values: idempotent
    assert _strengths(mdb, tenant) == got


def test_replayed_history_starts_fresh(mdb: sessionmaker[Session]) -> None:
    """Age runs from when the service stored the memory, not from the event time."""
    tenant = "decay-replay"
    said = datetime(2023, 5, 1, tzinfo=UTC)
    add_memory(mdb, tenant=tenant, content="said in 2023", at=T0, created_at=said)
    decay_memories(mdb, now=T0 + timedelta(hours=1), policy=POLICY, batch_size=50, max_batches=5)
    assert _strengths(mdb, tenant)["said in 2023"] > 0.99


def test_batches_are_bounded_and_a_cursor_resumes(postgres: PostgresService) -> None:
    with isolated_database(postgres, "memwell_test_decay_batches") as sessions:
        for i in range(10):
            add_memory(sessions, tenant="decay-batches", content=f"m{i}", at=T0)
        now = T0 + timedelta(days=7)
        first = decay_memories(sessions, now=now, policy=POLICY, batch_size=3, max_batches=2)
        assert first.batches == 2 and first.counts["scanned"] == 6 and not first.finished
        rest = decay_memories(
            sessions, now=now, policy=POLICY, batch_size=3, max_batches=10, cursor=first.cursor
        )
        assert rest.finished and rest.counts["scanned"] == 4
        assert all(v < 1.0 for v in _strengths(sessions, "decay-batches").values())
