"""A summary request for turns that were stored and then cleared settles at once: the
worker finishes it (no retry, no dead letter, no session row made again) and counts the
turns as dropped. A turn still on its way is another matter: that request waits."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.core.queues import TASK_QUEUES, TaskName
from memwell.db.models import ChatSession, DeadLetter, Turn
from memwell.intake.dropped_turns import SESSION_CLEARED, record_dropped
from memwell.intake.task_message import random_uuid, task_message
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from memwell.memories.erasure import erase_user_rows
from memwell.pipeline.summarize import LocalSummarizer, TurnsNotPersisted, fold_into_summary

SUMMARIZER = LocalSummarizer(budget_tokens=200, threshold=0.35)


def _finished(worker: WorkerProcess, task_id: str) -> list[dict[str, Any]]:
    """The worker's 'task finished' log records of this task, oldest first."""
    records = []
    for line in worker.log_path.read_text(errors="replace").splitlines():
        if task_id in line and line.startswith("{"):
            record = json.loads(line)
            if record.get("event") == "task finished" and record.get("task_id") == task_id:
                records.append(record)
    return records


def _statuses(db: sessionmaker[Session], tenant: str, turn_ids: list[str]) -> list[str]:
    with db() as s:
        return list(s.scalars(select(Turn.status).where(Turn.tenant == tenant,
                                                         Turn.id.in_(turn_ids))))  # fmt: skip


def test_a_summary_of_cleared_turns_settles_without_a_dead_letter(
    api: TestClient,
    make_key: Callable[..., dict[str, str]],
    worker: WorkerProcess,
    db: sessionmaker[Session],
    stack_env: dict[str, str],
    ids: dict[str, str],
) -> None:
    tenant, user, sid = ids["tenant"], ids["user"], ids["session"]
    turn_ids = [
        memwell.enqueue_turn(user_id=user, session_id=sid, content=text, tenant=tenant)
        for text in ("I moved to Lisbon in March.", "My daughter plays the cello.")
    ]
    wait_for(
        lambda: _statuses(db, tenant, turn_ids) == ["processed"] * 2,
        timeout=60,
        what="the turns stored",
    )
    cleared = api.delete(
        "/v1/turns", params={"user_id": user, "session_id": sid}, headers=make_key(tenant)
    )
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["counts"]["turns"] == 2

    # The request the chat path sends when turns leave the session's buffer.
    kwargs = {"tenant": tenant, "user_id": user, "session_id": sid, "turn_ids": turn_ids}
    queue = TASK_QUEUES[TaskName.SUMMARIZE_SESSION].value
    task_id, message = task_message(
        TaskName.SUMMARIZE_SESSION, orjson.dumps(kwargs), queue, task_id=random_uuid()
    )
    client = redis.Redis.from_url(stack_env["REDIS_URL"])
    try:
        client.lpush(queue, message)
    finally:
        client.close()

    [finished] = wait_for(
        lambda: _finished(worker, task_id), timeout=60, what="the summary task to finish"
    )
    assert finished["outcome"] == "success", finished  # settled on its first run: no retry
    with db() as s:
        letters = s.scalars(
            select(DeadLetter).where(DeadLetter.task_name == TaskName.SUMMARIZE_SESSION.value,
                                     DeadLetter.tenant == tenant)
        ).all()  # fmt: skip
        assert letters == []
        assert s.get(ChatSession, (tenant, user, sid)) is None  # the clear stays a clear
    assert worker.alive()


def test_stored_turns_that_were_cleared_are_skipped_and_missing_ones_are_waited_for(
    db: sessionmaker[Session], ids: dict[str, str], stack_env: dict[str, str]
) -> None:
    """stack_env: the dropped turns' hashes are keyed by the test stack's secret."""
    key = {"tenant": ids["tenant"], "user_id": ids["user"], "session_id": ids["session"]}
    cleared = [f"{ids['user']}-cleared-{n}" for n in range(2)]
    with db.begin() as session:
        record_dropped(session, tenant=ids["tenant"], turn_ids=cleared, reason=SESSION_CLEARED)
    with db.begin() as session:
        settled = fold_into_summary(session, SUMMARIZER, turn_ids=cleared, **key)
    assert (settled.folded, settled.dropped) == (0, 2)
    # Not stored and not dropped: still on its way, so the task retries (transient).
    with db.begin() as session, pytest.raises(TurnsNotPersisted):
        fold_into_summary(session, SUMMARIZER, turn_ids=[*cleared, "on-its-way"], **key)


def test_a_summary_of_an_erased_users_turns_settles(
    db: sessionmaker[Session], ids: dict[str, str], stack_env: dict[str, str]
) -> None:
    """Turns of an erased user that are not stored never will be: the request settles,
    and makes no session row for the erased user."""
    key = {"tenant": ids["tenant"], "user_id": ids["user"], "session_id": ids["session"]}
    with db.begin() as session:
        erase_user_rows(session, tenant=ids["tenant"], user_id=ids["user"])
    with db.begin() as session:
        settled = fold_into_summary(session, SUMMARIZER, turn_ids=["gone-1", "gone-2"], **key)
    assert (settled.folded, settled.dropped) == (0, 2)
    with db() as session:
        assert session.get(ChatSession, (ids["tenant"], ids["user"], ids["session"])) is None
