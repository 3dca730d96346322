"""A test that SIGKILLs its worker gives the worker's messages back at once
(tests/support/killed_workers.py): the `unacked` hash keeps none of them, so the
queues drain and a later test's wait for an idle broker does not wait out the
visibility timeout. What live workers hold stays theirs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis

from memwell.core.queues import TaskName
from memwell.intake.dispatch import producer_app
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.killed_workers import kill_worker, task_id_of

#: Long enough that a worker holds its task (scheduled) through the kill and restore.
ETA_S = 20


def _unacked_ids(redis_url: str) -> set[str | None]:
    client = redis.Redis.from_url(redis_url)
    try:
        return {task_id_of(entry) for entry in client.hvals("unacked")}
    finally:
        client.close()


def _queued(redis_url: str, queue: str) -> int:
    client = redis.Redis.from_url(redis_url)
    try:
        return int(client.llen(queue))
    finally:
        client.close()


@pytest.fixture
def queues() -> tuple[str, str]:
    """Two queues of this test alone: no other worker of the session takes their tasks."""
    tag = uuid.uuid4().hex[:8]
    return f"kill-test-victim-{tag}", f"kill-test-keeper-{tag}"


@pytest.fixture
def workers(
    stack_env: dict[str, str], queues: tuple[str, str]
) -> Iterator[tuple[WorkerProcess, WorkerProcess]]:
    victim = WorkerProcess(stack_env, concurrency=1, name="victim", queues=queues[0])
    keeper = WorkerProcess(stack_env, concurrency=1, name="keeper", queues=queues[1])
    try:
        victim.start()
        keeper.start()
        yield victim, keeper
    finally:
        victim.stop()
        keeper.stop()


def test_a_killed_workers_messages_go_back_and_drain(
    redis_url: str, queues: tuple[str, str], workers: tuple[WorkerProcess, WorkerProcess]
) -> None:
    victim, keeper = workers
    eta = datetime.now(UTC) + timedelta(seconds=ETA_S)
    send = producer_app(redis_url).send_task
    mine = send(TaskName.FLUSH_ACCESS, queue=queues[0], eta=eta).id
    theirs = send(TaskName.FLUSH_ACCESS, queue=queues[1], eta=eta).id
    wait_for(lambda: {mine, theirs} <= _unacked_ids(redis_url), timeout=30, what="both tasks held")

    given = kill_worker(victim, redis_url)

    held = _unacked_ids(redis_url)
    assert mine not in held  # back in its queue, not waiting out the visibility timeout
    assert _queued(redis_url, queues[0]) == 1
    assert theirs in held and keeper.alive()  # a live worker's task stays with it
    assert mine in given and theirs not in given

    victim.start()
    wait_for(
        lambda: _queued(redis_url, queues[0]) == 0 and mine not in _unacked_ids(redis_url),
        timeout=ETA_S + 60,
        what="the given-back task to run",
    )
    wait_for(lambda: theirs not in _unacked_ids(redis_url), timeout=60, what="the keeper's task")
