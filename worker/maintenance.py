"""Beat's maintenance tasks: thin shells over memwell.maintenance.jobs.

Each takes the job's Redis lock (a second beat or a manual run then skips), runs a
bounded number of batches, and, when the walk is unfinished, sends itself the cursor
so the next slice continues where this one stopped. The clock is read here, once;
the jobs take it as an argument.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from memwell.core import stack
from memwell.core.queues import Queue, TaskName
from memwell.maintenance.batches import Cursor, JobReport
from memwell.maintenance.jobs import run_close_idle, run_decay, run_prune, run_sweep
from memwell.maintenance.lock import job_lock
from memwell.maintenance.sessions import summary_memory_closer
from worker.celery_app import app
from worker.runtime import get_redis, get_runtime
from worker.tasks import MemwellTask

SOFT_LIMIT_S = 240
HARD_LIMIT_S = 300


def _locked(job: str, run: Callable[[], JobReport]) -> dict[str, Any]:
    with job_lock(get_redis(), job, ttl_s=HARD_LIMIT_S) as acquired:
        if not acquired:
            return {"job": job, "skipped": "another run holds the lock"}
        return run().as_dict()


def _continue(task: Any, result: dict[str, Any]) -> dict[str, Any]:
    cursor = result.get("cursor")
    if cursor:
        task.apply_async(kwargs={"cursor": cursor}, queue=Queue.MAINTENANCE.value)
    return result


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.DECAY.value,
    soft_time_limit=SOFT_LIMIT_S,
    time_limit=HARD_LIMIT_S,
)
def decay(self: MemwellTask, *, cursor: Cursor | None = None) -> dict[str, Any]:
    """Store the retention strength of live memories."""
    rt = get_runtime()
    now = datetime.now(UTC)
    result = _locked("decay", lambda: run_decay(rt.sessions, rt.settings, now=now, cursor=cursor))
    return _continue(self, result)


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.PRUNE.value,
    soft_time_limit=SOFT_LIMIT_S,
    time_limit=HARD_LIMIT_S,
)
def prune(self: MemwellTask, *, cursor: Cursor | None = None) -> dict[str, Any]:
    """Tombstone expired and weak memories; hard-delete old tombstones."""
    rt = get_runtime()
    now = datetime.now(UTC)
    result = _locked("prune", lambda: run_prune(rt.sessions, rt.settings, now=now, cursor=cursor))
    return _continue(self, result)


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.CLOSE_IDLE_SESSIONS.value,
    soft_time_limit=SOFT_LIMIT_S,
    time_limit=HARD_LIMIT_S,
)
def close_idle_sessions(self: MemwellTask, *, cursor: Cursor | None = None) -> dict[str, Any]:
    """Summarize, close and flush sessions idle for MEMWELL_IDLE_SESSION_MINUTES."""
    rt = get_runtime()
    now = datetime.now(UTC)
    result = _locked(
        "close-idle",
        lambda: run_close_idle(
            rt.sessions,
            rt.settings,
            get_redis(),
            now=now,
            cursor=cursor,
            summarize=summary_memory_closer(rt.embedder, rt.steps.summarizer),
        ),
    )
    return _continue(self, result)


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.SWEEP_PENDING.value,
    soft_time_limit=50,
    time_limit=60,
)
def sweep_pending(self: MemwellTask) -> dict[str, Any]:
    """Re-dispatch turns stuck in pending; report dead letters."""
    rt = get_runtime()
    now = datetime.now(UTC)
    broker_url = stack.redis_url(rt.settings)
    return _locked(
        "sweep",
        lambda: run_sweep(rt.sessions, rt.settings, get_redis(), broker_url=broker_url, now=now),
    )
