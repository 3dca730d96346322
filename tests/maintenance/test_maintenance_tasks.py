"""The beat tasks run in a real worker off the real broker and reach the database:
decay stores a faded strength, prune tombstones a long-unused trivial memory (and
leaves a pinned one), close-idle closes a session idle since 2020."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import redis
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.queues import Queue, TaskName
from memwell.db.models import ChatSession, Memory
from memwell.intake.dispatch import producer_app
from memwell.intake.persist import persist_turns
from memwell.intake.turns import IngestPayload, TurnIn
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from memwell.maintenance.runs import RUNS_KEY
from tests.support.maintenance_factories import add_memory

LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)


def _send(stack_env: dict[str, str], task: TaskName) -> None:
    producer_app(stack_env["REDIS_URL"]).send_task(task, kwargs={}, queue=Queue.MAINTENANCE)


def test_beat_tasks_run_in_the_worker(
    stack_env: dict[str, str], worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    tenant = ids["tenant"]
    faded = add_memory(db, tenant=tenant, at=LONG_AGO, importance=0.0, strength=1.0)
    kept = add_memory(db, tenant=tenant, at=LONG_AGO, importance=0.0, pinned=True)
    with db.begin() as s:
        turn = TurnIn(user_id=ids["user"], session_id="old", content="hi", created_at=LONG_AGO)
        persist_turns(s, IngestPayload(tenant=tenant, turns=[turn]))

    def memory(memory_id: object) -> Memory:
        with db() as s:
            row = s.get(Memory, memory_id)
        assert row is not None
        return row

    _send(stack_env, TaskName.DECAY)
    wait_for(lambda: memory(faded).strength < 0.01, timeout=60, what="decay in the worker")

    _send(stack_env, TaskName.PRUNE)
    wait_for(lambda: memory(faded).deleted_at is not None, timeout=60, what="prune")
    assert memory(kept).deleted_at is None

    _send(stack_env, TaskName.CLOSE_IDLE_SESSIONS)

    def closed() -> bool:
        with db() as s:
            status = s.scalar(
                select(ChatSession.status).where(
                    ChatSession.tenant == tenant, ChatSession.id == "old"
                )
            )
        return status == "closed"

    wait_for(closed, timeout=60, what="close-idle in the worker")
    assert worker.alive()

    # Each job's last run is kept for operators (the console's pipeline page).
    client = redis.Redis.from_url(stack_env["REDIS_URL"])
    wait_for(
        lambda: {b"decay", b"prune"} <= set(client.hkeys(RUNS_KEY)),
        timeout=30,
        what="the runs recorded",
    )
    assert json.loads(client.hget(RUNS_KEY, "decay") or "{}")["batches"] >= 1


def test_the_fold_job_moves_a_deferred_memory_into_the_index_in_the_worker(
    stack_env: dict[str, str], worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    memory_id = add_memory(db, tenant=ids["tenant"], at=LONG_AGO, importance=0.5)
    with db.begin() as s:
        s.execute(update(Memory).where(Memory.id == memory_id).values(ann_deferred=True))

    def deferred() -> bool:
        with db() as s:
            return bool(s.scalar(select(Memory.ann_deferred).where(Memory.id == memory_id)))

    assert deferred()
    _send(stack_env, TaskName.FOLD_ANN_TAILS)
    wait_for(lambda: not deferred(), timeout=60, what="fold-ann-tails in the worker")
    assert worker.alive()
