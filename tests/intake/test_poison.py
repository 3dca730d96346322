"""A poison message becomes a dead letter; the worker lives on and keeps working."""

from __future__ import annotations

import base64

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.core.queues import Queue, TaskName
from memwell.db.models import DeadLetter, Turn
from memwell.intake.dispatch import producer_app
from memwell.intake.task_message import task_message
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


def test_a_nul_in_content_is_dead_lettered_escaped_and_never_logged(
    stack_env: dict[str, str], worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    """Postgres refuses a NUL in text and jsonb: the letter keeps it escaped. The
    validation error names the field, never the content, in the letter and the log."""
    canary = f"canary-{ids['user']}"
    payload = {
        "v": 1, "tenant": ids["tenant"],
        "turns": [{"user_id": ids["user"], "session_id": "s", "content": f"{canary}\x00tail",
                   "metadata": {"k": f"{canary}-meta"}, "unknown_field": 1}],
    }  # fmt: skip
    producer_app(stack_env["REDIS_URL"]).send_task(
        TaskName.INGEST_TURNS, kwargs={"payload": payload}, queue=Queue.INGEST
    )

    def letter() -> DeadLetter | None:
        with db() as session:
            return session.scalars(
                select(DeadLetter).where(DeadLetter.tenant == ids["tenant"])
            ).first()

    found = wait_for(letter, timeout=60, what="the dead letter of the NUL payload")
    stored = found.payload["payload"]["turns"][0]["content"]
    assert stored == f"{canary}\\u0000tail"  # escaped, not dropped
    assert found.error.startswith("invalid payload: ") and "turns.0" in found.error
    assert canary not in found.error
    assert canary not in worker.log()
    assert worker.alive()


def test_an_undecodable_raw_message_is_kept_whole_and_never_logged(
    stack_env: dict[str, str], worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    """A raw producer's body that is not UTF-8: Celery's consumer would log it whole
    and drop it; ours keeps its bytes in a dead letter and logs id, size and class."""
    canary = f"canary-{ids['user']}"
    kwargs = (
        b'{"payload": {"v": 1, "tenant": "' + ids["tenant"].encode() + b'", "turns": [{'
        b'"user_id": "u", "session_id": "s", "content": "' + canary.encode() + b' \xff\xfe"}]}}'
    )
    task_id, message = task_message(TaskName.INGEST_TURNS, kwargs, Queue.INGEST)
    redis.Redis.from_url(stack_env["REDIS_URL"]).lpush(Queue.INGEST.value, message)

    def letter() -> DeadLetter | None:
        with db() as session:
            rows = session.scalars(
                select(DeadLetter).where(DeadLetter.tenant.is_(None)).order_by(DeadLetter.id)
            ).all()
        return next((r for r in rows if r.payload.get("message_id") == task_id), None)

    found = wait_for(letter, timeout=60, what="the dead letter of the undecodable message")
    assert found.task_name == TaskName.INGEST_TURNS
    assert base64.b64decode(found.payload["unreadable_body_b64"]).find(b"\xff\xfe") > 0
    assert found.error.startswith("undecodable body")
    # The whole log: the session's worker keeps logging other tests' work meanwhile. One
    # line per kind of unreadable message a minute: an earlier test's may stand for it.
    log = worker.log_path.read_text(errors="replace")
    assert task_id in log or "a message could not be read as a task (undecodable" in log
    assert canary not in log
    assert worker.alive()
