"""The last run of each maintenance job, kept in Redis for operators to read.

Beat's tasks record what a run did (its batches and counts) when it ends; the console
shows it. Only the last run per job is kept: history belongs in the logs and metrics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import redis
import redis.asyncio as aioredis

from memwell.buffer.session_buffer import KEY_PREFIX
from memwell.maintenance.batches import JobReport

RUNS_KEY: Final = f"{KEY_PREFIX}maintenance:last_run"


@dataclass(frozen=True)
class JobRun:
    """When a job last ended, whether its walk finished, and what it counted."""

    job: str
    ended_at: datetime
    batches: int
    finished: bool
    counts: dict[str, int]


def record_run(client: redis.Redis, report: JobReport, *, ended_at: datetime) -> None:
    """Keep `report` as the job's last run (a dry run is not a run)."""
    if report.dry_run:
        return
    entry = {
        "ended_at": ended_at.isoformat(),
        "batches": report.batches,
        "finished": report.finished,
        "counts": report.counts,
    }
    client.hset(RUNS_KEY, report.job, json.dumps(entry))


def _parse(job: str, raw: str | bytes) -> JobRun | None:
    try:
        entry = json.loads(raw)
        return JobRun(
            job=job,
            ended_at=datetime.fromisoformat(entry["ended_at"]),
            batches=int(entry["batches"]),
            finished=bool(entry["finished"]),
            counts={str(k): int(v) for k, v in entry["counts"].items()},
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None  # written by another version: not worth failing a status page


async def last_runs(client: aioredis.Redis) -> list[JobRun]:
    """Every job's last recorded run, by job name."""
    raw = await client.hgetall(RUNS_KEY)
    runs = []
    for key, value in sorted(raw.items()):
        job = key.decode() if isinstance(key, bytes) else str(key)
        run = _parse(job, value)
        if run is not None:
            runs.append(run)
    return runs
