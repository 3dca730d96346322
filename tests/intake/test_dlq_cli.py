"""`memwell dlq list` / `memwell dlq replay` over the dead_letters table, with a real
worker: a poison payload is dead-lettered, listed, replayed and lands again."""

from __future__ import annotations

from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.queues import Queue, TaskName
from memwell.db.models import DeadLetter
from memwell.intake.dispatch import producer_app
from memwell.local.cli import main
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess


def _letters(db: sessionmaker[Session], marker: str) -> list[DeadLetter]:
    with db() as session:
        return list(
            session.scalars(
                select(DeadLetter)
                .where(DeadLetter.payload["payload"]["tenant"].astext == marker)
                .order_by(DeadLetter.id)
            )
        )


def test_dlq_list_and_replay(
    stack_env: dict[str, str], worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    marker = ids["tenant"]
    poison = {"v": 99, "tenant": marker, "turns": [{"id": f"turn-of-{marker}", "content": "x"}]}
    producer_app(stack_env["REDIS_URL"]).send_task(
        TaskName.INGEST_TURNS, kwargs={"payload": poison}, queue=Queue.INGEST
    )
    [letter] = wait_for(lambda: _letters(db, marker), timeout=60, what="the dead letter")

    runner = CliRunner()
    listed = runner.invoke(main, ["dlq", "list", "--limit", "1000"])
    assert listed.exit_code == 0, listed.output
    assert f"{letter.id:>6}" in listed.output and "memwell.ingest_turns" in listed.output
    assert f"turns: turn-of-{marker}" in listed.output  # which turns the letter holds
    with_payload = runner.invoke(main, ["dlq", "list", "--limit", "1000", "--payload"])
    assert f'"tenant": "{marker}"' in with_payload.output

    assert runner.invoke(main, ["dlq", "replay"]).exit_code != 0  # ids or --all required
    replayed = runner.invoke(main, ["dlq", "replay", str(letter.id)])
    assert replayed.exit_code == 0, replayed.output
    assert f"replayed 1: {letter.id}" in replayed.output
    # Still poison: the replay lands as a new dead letter, and the worker lives on.
    letters = wait_for(lambda: len(_letters(db, marker)) == 2 and _letters(db, marker), timeout=60)
    assert letters[0].replayed_at is not None and letters[1].replayed_at is None
    assert worker.alive()
    again = runner.invoke(main, ["dlq", "replay", str(letter.id)])
    assert "replayed 0" in again.output
