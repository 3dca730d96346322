"""prune: tombstones what is expired (per memory or by the per-kind TTL) or faded,
never pinned or important memories; hard-deletes old tombstones without reviving
their history; two runs at once act on each row exactly once."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.errors import ConfigurationError
from memwell.core.settings import Settings
from memwell.db.models import DroppedTurn, Memory, MemoryEvent
from memwell.intake.dropped_turns import SESSION_CLEARED, dropped_among, record_dropped
from memwell.local.session_services import PostgresService
from memwell.maintenance.batches import JobReport
from memwell.maintenance.prune import PrunePolicy, prune_memories
from memwell.maintenance.retention import RetentionPolicy
from memwell.memories.tombstones import turn_hash
from tests.support.maintenance_factories import add_memory, isolated_database

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = PrunePolicy(retention=RetentionPolicy())


@pytest.fixture
def mdb(postgres: PostgresService) -> Iterator[sessionmaker[Session]]:
    with isolated_database(postgres, f"memwell_test_prune_{uuid.uuid4().hex[:8]}") as sessions:
        yield sessions


def _state(sessions: sessionmaker[Session]) -> dict[str, str]:
    with sessions() as s:
        rows = s.execute(select(Memory.content, Memory.deleted_at)).all()
    return {c: ("live" if d is None else "tombstone") for c, d in rows}


def _delete_reasons(sessions: sessionmaker[Session]) -> dict[str, str]:
    with sessions() as s:
        rows = s.execute(
            select(MemoryEvent.old_content, MemoryEvent.reason).where(MemoryEvent.event == "delete")
        ).all()
    return {c: r for c, r in rows}


def test_prune_decides_by_expiry_ttl_strength_and_protects(mdb: sessionmaker[Session]) -> None:
    now = T0 + timedelta(days=95)
    t = "prune"
    add_memory(mdb, tenant=t, content="expired", at=T0, expires_at=T0 + timedelta(days=1))
    add_memory(mdb, tenant=t, content="not yet expired", at=T0, expires_at=now + timedelta(days=1),
               access_count=10)  # fmt: skip
    # Used enough to stay strong (half-life ~72 days), but episodes live 90 days.
    add_memory(mdb, tenant=t, content="old episode", at=T0, kind="episode", access_count=10)
    add_memory(mdb, tenant=t, content="old fact", at=T0, kind="fact", access_count=10)
    add_memory(mdb, tenant=t, content="reinforced episode", at=T0, kind="episode",
               access_count=10, updated_at=T0 + timedelta(days=60))  # fmt: skip
    add_memory(mdb, tenant=t, content="faded", at=T0, importance=0.0)
    add_memory(mdb, tenant=t, content="pinned", at=T0, importance=0.0, pinned=True,
               expires_at=T0)  # fmt: skip
    add_memory(mdb, tenant=t, content="important", at=T0, importance=0.9, kind="episode",
               expires_at=T0)  # fmt: skip

    dry = prune_memories(mdb, now=now, policy=POLICY, batch_size=3, max_batches=50, dry_run=True)
    assert (dry.counts["tombstoned_expired"], dry.counts["tombstoned_ttl"]) == (1, 1)
    assert dry.counts["tombstoned_weak"] == 1
    assert set(_state(mdb).values()) == {"live"}  # a dry run changes nothing

    report = prune_memories(mdb, now=now, policy=POLICY, batch_size=3, max_batches=50)
    assert report.counts == dry.counts
    assert _state(mdb) == {
        "expired": "tombstone",
        "not yet expired": "live",
        "old episode": "tombstone",
        "old fact": "live",
        "reinforced episode": "live",
        "faded": "tombstone",
        "pinned": "live",
        "important": "live",
    }
    assert _delete_reasons(mdb) == {
        "expired": "prune: expired",
        "old episode": "prune: ttl",
        "faded": "prune: weak",
    }
    again = prune_memories(mdb, now=now, policy=POLICY, batch_size=3, max_batches=50)
    assert again.counts["tombstoned_expired"] + again.counts["tombstoned_weak"] == 0


def test_hard_delete_after_grace_keeps_history_dead(mdb: sessionmaker[Session]) -> None:
    t = "grace"
    old = add_memory(mdb, tenant=t, content="tombstoned long ago", at=T0, deleted_at=T0,
                     importance=0.9)  # fmt: skip
    add_memory(mdb, tenant=t, content="earlier version", at=T0, importance=0.9,
               superseded_by=old)  # fmt: skip
    add_memory(mdb, tenant=t, content="tombstoned lately", at=T0, importance=0.9,
               deleted_at=T0 + timedelta(days=20))  # fmt: skip
    now = T0 + timedelta(days=31)

    report = prune_memories(mdb, now=now, policy=POLICY, batch_size=10, max_batches=10)
    assert report.counts["hard_deleted"] == 1 and report.counts["tombstoned_history"] == 1
    assert _state(mdb) == {"earlier version": "tombstone", "tombstoned lately": "tombstone"}
    with mdb() as s:
        events = s.scalar(
            select(func.count()).select_from(MemoryEvent).where(MemoryEvent.memory_id == old)
        )
    assert events == 0  # this factory wrote none; history rows are never cascaded anyway


def test_ttl_policy_rejects_unknown_kinds() -> None:
    with pytest.raises(ConfigurationError):
        PrunePolicy(retention=RetentionPolicy(), ttl_days_by_kind=(("episodes", 3.0),))


def _concurrently(n: int, run: Callable[[], JobReport]) -> list[JobReport]:
    barrier = threading.Barrier(n)
    results: list[JobReport] = []
    errors: list[BaseException] = []

    def go() -> None:
        try:
            barrier.wait()
            results.append(run())
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=go) for _ in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors
    return results


def test_two_concurrent_prunes_touch_each_row_once(mdb: sessionmaker[Session]) -> None:
    n = 400
    for i in range(n):
        add_memory(mdb, tenant="race", content=f"expired {i}", at=T0, expires_at=T0)
        add_memory(mdb, tenant="race", content=f"gone {i}", at=T0, deleted_at=T0)
    now = T0 + timedelta(days=40)
    reports = _concurrently(
        2, lambda: prune_memories(mdb, now=now, policy=POLICY, batch_size=20, max_batches=100)
    )
    assert sum(r.counts["tombstoned_expired"] for r in reports) == n
    assert sum(r.counts["hard_deleted"] for r in reports) == n
    with mdb() as s:
        per_memory = s.execute(
            select(MemoryEvent.memory_id, func.count())
            .where(MemoryEvent.event == "delete")
            .group_by(MemoryEvent.memory_id)
        ).all()
        remaining = s.scalar(select(func.count()).select_from(Memory))
    assert len(per_memory) == n and all(c == 1 for _, c in per_memory)
    assert remaining == n  # the expired ones, now tombstones inside their grace period


def _drop(sessions: sessionmaker[Session], turn_ids: list[str], at: datetime) -> None:
    """Record these turns as dropped (the real path), `at` this time."""
    with sessions.begin() as s:
        record_dropped(s, tenant="drops", turn_ids=turn_ids, reason=SESSION_CLEARED)
        s.execute(
            update(DroppedTurn)
            .where(DroppedTurn.tenant == "drops", DroppedTurn.turn_hash.in_(
                [turn_hash("drops", t) for t in turn_ids]))
            .values(dropped_at=at)
        )  # fmt: skip


def _still_dropped(sessions: sessionmaker[Session], turn_ids: list[str]) -> set[str]:
    with sessions() as s:
        return dropped_among(s, tenant="drops", turn_ids=turn_ids)


def test_dropped_turns_expire_after_their_retention_in_bounded_batches(
    mdb: sessionmaker[Session], stack_env: dict[str, str]
) -> None:
    """stack_env: the turn hashes' key lives in the test stack's data dir."""
    now = T0 + timedelta(days=100)
    policy = PrunePolicy(retention=RetentionPolicy(), dropped_turns_retention=timedelta(days=30))
    old = [f"old-{i}" for i in range(5)]
    young = ["young-0", "young-1"]
    _drop(mdb, old, now - timedelta(days=30, seconds=1))
    _drop(mdb, young, now - timedelta(days=29))

    dry = prune_memories(mdb, now=now, policy=policy, batch_size=2, max_batches=50, dry_run=True)
    assert dry.counts["dropped_turns_expired"] == 5
    assert _still_dropped(mdb, old + young) == set(old + young)  # a dry run deletes nothing

    # Bounded: one batch of two per run, the oldest first.
    one = prune_memories(mdb, now=now, policy=policy, batch_size=2, max_batches=1)
    assert one.counts["dropped_turns_expired"] == 2
    assert len(_still_dropped(mdb, old)) == 3

    rest = prune_memories(mdb, now=now, policy=policy, batch_size=2, max_batches=50)
    assert rest.counts["dropped_turns_expired"] == 3
    assert _still_dropped(mdb, old + young) == set(young)


def test_the_dropped_turns_retention_comes_from_the_settings() -> None:
    settings = Settings(MEMWELL_DROPPED_TURNS_RETENTION_DAYS=7)  # type: ignore[call-arg]
    assert PrunePolicy.from_settings(settings).dropped_turns_retention == timedelta(days=7)
    assert Settings().dropped_turns_retention_days == PrunePolicy(
        retention=RetentionPolicy()
    ).dropped_turns_retention / timedelta(days=1)
