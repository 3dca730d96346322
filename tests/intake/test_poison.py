"""A poison message becomes a dead letter; the worker lives on and keeps working."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.core.queues import Queue, TaskName
from memwell.db.models import DeadLetter, Turn
from memwell.intake.dispatch import producer_app
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess


def test_malformed_payload_is_dead_lettered_and_worker_survives(
    stack_env: dict[str, str], worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    marker = f"poison-{ids['tenant']}"
    producer_app(stack_env["REDIS_URL"]).send_task(
        TaskName.INGEST_TURNS,
        kwargs={"payload": {"v": 99, "tenant": marker, "turns": "not a list"}},
        queue=Queue.INGEST,
    )

    def letter() -> DeadLetter | None:
        with db() as session:
            rows = session.scalars(
                select(DeadLetter).where(DeadLetter.task_name == TaskName.INGEST_TURNS)
            ).all()
        return next((r for r in rows if r.payload.get("payload", {}).get("tenant") == marker), None)

    found = wait_for(letter, timeout=60, what="the dead letter")
    assert "invalid payload" in found.error
    assert worker.alive()

    turn_id = memwell.enqueue_turn(
        user_id=ids["user"], session_id="s", content="still working", tenant=ids["tenant"]
    )

    def processed() -> bool:
        with db() as session:
            return (
                session.scalar(
                    select(Turn.status).where(Turn.tenant == ids["tenant"], Turn.id == turn_id)
                )
                == "processed"
            )

    wait_for(processed, timeout=60, what="a good turn after the poison one")
