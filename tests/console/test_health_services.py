"""The services behind the pipeline page: the consolidation rate and the last runs of
maintenance jobs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import redis
import redis.asyncio as aioredis
from sqlalchemy import insert
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.engine import make_async_engine, make_async_sessionmaker
from memwell.db.models import MemoryEvent
from memwell.maintenance.activity import ConsolidationRate, consolidation_rate
from memwell.maintenance.batches import JobReport
from memwell.maintenance.runs import RUNS_KEY, JobRun, last_runs, record_run
from tests.console.helpers import run_async


def _rate(database_url: str, now: datetime) -> ConsolidationRate:
    async def read() -> ConsolidationRate:
        engine = make_async_engine(database_url, pool_size=1)
        try:
            async with make_async_sessionmaker(engine)() as session:
                return await consolidation_rate(session, now=now, minutes=15)
        finally:
            await engine.dispose()

    return run_async(read)


def test_the_rate_counts_consolidation_events_per_minute(
    db: sessionmaker[Session], database_url: str, ids: dict[str, str]
) -> None:
    now = datetime.now(UTC)
    before = _rate(database_url, now)
    events = ["add", "add", "reinforce", "supersede", "decay", "delete"]
    with db.begin() as session:
        session.execute(
            insert(MemoryEvent),
            [{"tenant": ids["tenant"], "user_id": ids["user"], "memory_id": uuid.uuid4(),
              "event": e, "source_turn_ids": []} for e in events],
        )  # fmt: skip
    after = _rate(database_url, datetime.now(UTC))
    assert len(after.minutes) == 15
    assert after.minutes == sorted(after.minutes, key=lambda m: m.minute)
    assert (
        after.minutes[-1].minute
        <= datetime.now(UTC)
        < after.minutes[-1].minute + timedelta(minutes=1)
    )
    # Decay and delete are maintenance's, not consolidation's: 4 of the 6 count.
    gained = sum(m.events for m in after.minutes) - sum(
        m.events for m in before.minutes if m.minute >= after.minutes[0].minute
    )
    assert gained >= 4
    assert after.peak >= 4


def test_last_runs_keep_each_jobs_latest_and_skip_dry_runs(redis_url: str) -> None:
    job = f"test-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url)
    first, second = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    try:
        record_run(client, JobReport(job=job, dry_run=False, batches=1), ended_at=first)
        record_run(
            client,
            JobReport(job=job, dry_run=False, batches=2, counts={"pruned": 7}, cursor=["x"]),
            ended_at=second,
        )
        record_run(client, JobReport(job=job, dry_run=True, batches=9), ended_at=second)
        client.hset(RUNS_KEY, f"{job}-garbled", "not json")

        async def read() -> list[JobRun]:
            async_client = aioredis.Redis.from_url(redis_url)
            try:
                return await last_runs(async_client)
            finally:
                await async_client.aclose()

        runs = {r.job: r for r in run_async(read)}
    finally:
        client.hdel(RUNS_KEY, job, f"{job}-garbled")
    assert f"{job}-garbled" not in runs
    mine = runs[job]
    assert (mine.ended_at, mine.batches, mine.finished, mine.counts) == (
        second, 2, False, {"pruned": 7},
    )  # fmt: skip
