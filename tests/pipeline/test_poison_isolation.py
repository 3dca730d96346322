"""One user's poison fails only that user's turns (memwell/pipeline/isolation.py),
through a real worker: a database error on one user's rows (a trigger that refuses
that user's memories, a real error from the real database) sinks the batch it shares
with a second user of the tenant; the second user's turns are processed by the same
task, and the poisoned user's turns are retried alone and quarantined after the
bounded attempts, with one dead letter that names them (task, turn ids, the error's
kind; no text). Replaying the letter once the cause is gone consolidates them."""

from __future__ import annotations

import uuid

from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.core.queues import TaskName
from memwell.db.models import DeadLetter, Turn
from memwell.intake.dead_letters import replay_dead_letters
from memwell.intake.dispatch import send_by_name
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from memwell.pipeline.isolation import QUARANTINE_ATTEMPTS, REOPEN


def _turns(user: str, canary: str, lines: list[str]) -> list[dict[str, str]]:
    return [{"user_id": user, "session_id": "s", "content": f"{canary} {line}"} for line in lines]


def _rows(db: sessionmaker[Session], tenant: str, ids: list[str]) -> list[Turn]:
    with db() as session:
        return list(session.scalars(select(Turn).where(Turn.tenant == tenant, Turn.id.in_(ids))))


def test_a_poisoned_user_fails_alone_and_is_quarantined(
    worker: WorkerProcess,
    db: sessionmaker[Session],
    stack_env: dict[str, str],
    ids: dict[str, str],
) -> None:
    tenant, other = ids["tenant"], ids["user"]
    user = f"poisoned-{uuid.uuid4().hex[:10]}"
    canary = f"CANARY{uuid.uuid4().hex}"
    trigger = f"refuse_{uuid.uuid4().hex[:10]}"
    log_start = worker.log_path.stat().st_size
    with db.begin() as session:
        session.execute(text(f"""
            CREATE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                RAISE EXCEPTION 'this user''s rows are refused'
                    USING ERRCODE = 'check_violation';
            END $$"""))  # fmt: skip
        session.execute(text(
            f"CREATE TRIGGER {trigger} BEFORE INSERT ON memories FOR EACH ROW "
            f"WHEN (NEW.user_id = '{user}') EXECUTE FUNCTION {trigger}()"
        ))  # fmt: skip
    try:
        facts = ["I adopted a puppy named Biscuit last week.", "I moved to Boston from Sweden."]
        # One enqueue, so one ingest task and one consolidate batch hold both users.
        turn_ids = memwell.enqueue_turns(
            _turns(user, canary, facts) + _turns(other, canary, facts),
            tenant=tenant, broker_url=stack_env["REDIS_URL"],
        )  # fmt: skip
        poisoned, healthy = turn_ids[:2], turn_ids[2:]

        def quarantined() -> bool:
            return [t.status for t in _rows(db, tenant, poisoned)] == ["failed"] * 2

        wait_for(quarantined, timeout=60, interval=0.2, what="the poisoned turns quarantined")
        # The other user's turns were processed by the first task, on the first attempt:
        # never held up by the poisoned user's retries.
        assert [(t.status, t.attempts) for t in _rows(db, tenant, healthy)] == [
            ("processed", 1), ("processed", 1)]  # fmt: skip
        rows = _rows(db, tenant, poisoned)
        assert {t.attempts for t in rows} == {QUARANTINE_ATTEMPTS}
        assert {t.error for t in rows} == {
            f"quarantined after {QUARANTINE_ATTEMPTS} attempts: "
            "IntegrityError (CheckViolation, SQLSTATE 23514)"
        }
        with db() as session:
            [letter] = session.scalars(select(DeadLetter).where(DeadLetter.tenant == tenant))
        assert letter.task_name == TaskName.CONSOLIDATE_TURNS.value
        assert letter.payload == {"tenant": tenant, "turn_ids": sorted(poisoned), REOPEN: True}
        assert "IntegrityError" in letter.error and canary not in letter.error
    finally:
        with db.begin() as session:
            session.execute(text(f"DROP TRIGGER IF EXISTS {trigger} ON memories"))
            session.execute(text(f"DROP FUNCTION IF EXISTS {trigger}()"))

    # The cause fixed, the operator replays the letter: the turns are consolidated.
    with db.begin() as session:
        replay_dead_letters(
            session,
            lambda name, kwargs: send_by_name(name, kwargs, broker_url=stack_env["REDIS_URL"]),
            ids=[letter.id],
        )
    wait_for(
        lambda: [t.status for t in _rows(db, tenant, poisoned)] == ["processed"] * 2,
        timeout=60, interval=0.2, what="the replayed turns processed",
    )  # fmt: skip
    with worker.log_path.open("rb") as log:
        log.seek(log_start)
        worker_log = log.read().decode(errors="replace")
    assert "consolidating each user alone" in worker_log  # the log saw the failure
    assert canary not in worker_log, worker_log[worker_log.find(canary) - 600 :][:800]
