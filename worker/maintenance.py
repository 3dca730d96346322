"""Beat's maintenance tasks: thin shells over memwell.maintenance.jobs.

Each takes the job's Redis lock (a second beat or a manual run then skips), runs a
bounded number of batches, and, when the walk is unfinished, sends itself the cursor
so the next slice continues where this one stopped. The clock is read here, once;
the jobs take it as an argument.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text

from memwell.core import stack
from memwell.core.queues import Queue, TaskName
from memwell.maintenance.batches import Cursor, JobReport
from memwell.maintenance.jobs import run_close_idle, run_decay, run_prune, run_sweep
from memwell.maintenance.lock import job_lock
from memwell.maintenance.runs import record_run
from memwell.maintenance.sessions import summary_memory_closer
from memwell.reembed.dual_write import embedders
from memwell.reembed.lifecycle import note_error, tick
from memwell.reembed.sender import step_sender
from memwell.reembed.step import StepContext, hand_over, run_step
from worker.celery_app import app
from worker.runtime import get_redis, get_runtime
from worker.tasks import MemwellTask

SOFT_LIMIT_S = 240
HARD_LIMIT_S = 300
#: close-idle's own stop, before the soft limit: room for one last summary call
CLOSE_IDLE_BUDGET_S = SOFT_LIMIT_S - 90


def _locked(job: str, run: Callable[[], JobReport]) -> dict[str, Any]:
    with job_lock(get_redis(), job, ttl_s=HARD_LIMIT_S) as acquired:
        if not acquired:
            return {"job": job, "skipped": "another run holds the lock"}
        report = run()
        # The last run of each job, for `memwell status` readers and the console.
        record_run(get_redis(), report, ended_at=datetime.now(UTC))
        return report.as_dict()


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
            # Summaries may call the model: stop in time to commit what is closed, and
            # let the continuation task take the rest.
            deadline=time.monotonic() + CLOSE_IDLE_BUDGET_S,
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


REEMBED_STEP_BUDGET_S = 20.0  # then the next step is a new message: kills redo little


def _reembed_context() -> StepContext:
    rt = get_runtime()
    engine = rt.sessions.kw["bind"]
    return StepContext(
        sessions=rt.sessions,
        engine=engine,
        embedders=embedders(),
        ann_threshold=rt.settings.ann_threshold_rows,
    )


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.REEMBED_STEP.value,
    soft_time_limit=SOFT_LIMIT_S,
    time_limit=HARD_LIMIT_S,
)
def reembed_step(self: MemwellTask, *, migration_id: int, token: str) -> dict[str, Any]:
    """A re-embed's batches for a while, then the next step (memwell/reembed/step.py)."""
    ctx = _reembed_context()
    with ctx.sessions() as session:
        rate = session.execute(
            text("SELECT rate_per_s FROM embedding_migrations WHERE id = :id"), {"id": migration_id}
        ).scalar()
    try:
        more = run_step(
            ctx,
            migration_id=migration_id,
            token=token,
            budget_s=REEMBED_STEP_BUDGET_S,
            rate_per_s=float(rate or 0.0),
        )
    except Exception as exc:  # shown by `memwell reembed status`, then retried as usual
        note_error(ctx.sessions, migration_id=migration_id, error=f"{type(exc).__name__}: {exc}")
        raise
    if more:
        more = hand_over(ctx.sessions, migration_id, token, step_sender())
    return {"migration_id": migration_id, "continues": more}


@app.task(
    base=MemwellTask, bind=True, name=TaskName.REEMBED_TICK.value, soft_time_limit=50, time_limit=60
)
def reembed_tick(self: MemwellTask) -> dict[str, Any]:
    """Re-send a stalled re-embed's step; start the drop of old vectors after the grace."""
    rt = get_runtime()
    sent = tick(
        rt.sessions,
        stale_after=timedelta(seconds=rt.settings.reembed_stale_s),
        dispatch=step_sender(),
    )
    return {"resent": sent}
