"""Poison on a queue costs what the operator allows, not what the producer sends: a
100 MB item leaves a dead letter of the size cap (saying it was truncated) and the
worker consumes on; a flood of 2,000 items leaves a bounded table (the rest counted)
and a few log lines, not 2,000."""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from collections.abc import Iterator

import orjson
import pytest
import redis
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.queues import Queue, TaskName
from memwell.db.models import DeadLetter, Turn
from memwell.intake.dead_letters import RAW_BYTES_KEY
from memwell.intake.raw_letters import discard_dead_letters, open_raw_letters, raw_not_kept
from memwell.intake.task_message import task_message
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess

DEFAULT_CAP = 64 * 1024  # MEMWELL_DEAD_LETTER_RAW_MAX_BYTES, as the session worker runs
FLOOD = 2000
FLOOD_ROOM = 20  # open raw letters the flood's worker may add


def _push(redis_url: str, queue: str, *items: bytes) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        client.lpush(queue, *items)  # one command: the whole flood in one round trip
    finally:
        client.close()


def test_a_100_mb_item_leaves_a_letter_of_the_cap_and_the_worker_consumes_on(
    stack_env: dict[str, str], worker: WorkerProcess, db: sessionmaker[Session],
    ids: dict[str, str],
) -> None:  # fmt: skip
    assert worker.process is not None
    pid = worker.process.pid
    raw = b"{" + uuid.uuid4().hex.encode() + b"x" * (100 * 1024 * 1024)  # not JSON
    digest = hashlib.sha256(raw).hexdigest()
    turn_id = f"after-100mb-{uuid.uuid4().hex}"
    turn = {"id": turn_id, "user_id": ids["user"], "session_id": "s", "content": "still here"}
    good = orjson.dumps({"payload": {"v": 1, "tenant": ids["tenant"], "turns": [turn]}})
    _, good_message = task_message(TaskName.INGEST_TURNS, good, Queue.INGEST.value)
    _push(stack_env["REDIS_URL"], Queue.INGEST.value, raw, good_message)
    del good

    def letter() -> tuple[DeadLetter, int] | None:
        assert worker.alive(), f"the worker exited:\n{worker.log()}"
        with db() as session:
            row = session.execute(
                select(DeadLetter, func.octet_length(text("dead_letters.payload::text"))).where(
                    DeadLetter.payload["sha256"].astext == digest
                )
            ).first()
        return None if row is None else (row[0], int(row[1]))

    kept, stored_bytes = wait_for(letter, timeout=120, what="the 100 MB item kept")
    payload = kept.payload
    assert base64.b64decode(payload[RAW_BYTES_KEY]) == raw[:DEFAULT_CAP]
    assert (payload["truncated"], payload["size_bytes"]) == (True, len(raw))
    assert stored_bytes < DEFAULT_CAP * 4 / 3 + 1024  # the cap, not 140 MB
    assert f"truncated: the first {DEFAULT_CAP} of {len(raw)} bytes kept" in kept.error

    def processed() -> bool:
        with db() as session:
            status = session.scalar(
                select(Turn.status).where(Turn.tenant == ids["tenant"], Turn.id == turn_id)
            )
        return status == "processed"

    wait_for(processed, timeout=60, what="the good task behind the 100 MB item")
    assert worker.alive() and worker.process.pid == pid  # the same process throughout


@pytest.fixture
def flood_worker(
    stack_env: dict[str, str], db: sessionmaker[Session]
) -> Iterator[tuple[WorkerProcess, str, int]]:
    """A worker of its own on a queue of its own, its bound of open raw letters set
    FLOOD_ROOM above what the store holds now. Its letters are discarded after."""
    queue = f"poison-flood-{uuid.uuid4().hex[:8]}"
    with db() as session:
        bound = open_raw_letters(session) + FLOOD_ROOM
        newest = session.scalar(select(func.max(DeadLetter.id))) or 0
    env = {
        **stack_env,
        "MEMWELL_DEAD_LETTER_RAW_MAX_OPEN": str(bound),
        "MEMWELL_DEAD_LETTER_RAW_MAX_BYTES": "1024",
    }
    process = WorkerProcess(env, concurrency=1, name="flood", queues=queue)
    process.start()
    try:
        yield process, queue, bound
    finally:
        process.stop()
        process.log_path.unlink(missing_ok=True)
        with db.begin() as session:
            mine = session.scalars(
                select(DeadLetter.id).where(
                    DeadLetter.id > newest, DeadLetter.payload["queue"].astext == queue
                )
            ).all()
            discard_dead_letters(session, ids=list(mine))


def test_a_flood_of_poison_leaves_a_bounded_table_and_a_few_log_lines(
    stack_env: dict[str, str], db: sessionmaker[Session],
    flood_worker: tuple[WorkerProcess, str, int],
) -> None:  # fmt: skip
    worker, queue, bound = flood_worker
    with db() as session:
        before = raw_not_kept(session)
    counted_before = before.count if before is not None else 0
    started = time.monotonic()
    _push(stack_env["REDIS_URL"], queue, *(f"not json {n}".encode() for n in range(FLOOD)))

    def counted() -> int:
        assert worker.alive(), f"the worker exited:\n{worker.log()}"
        with db() as session:
            not_kept = raw_not_kept(session)
        return (not_kept.count if not_kept is not None else 0) - counted_before

    wait_for(lambda: counted() == FLOOD - FLOOD_ROOM, timeout=240, what="the flood consumed")
    elapsed = time.monotonic() - started
    with db() as session:
        assert open_raw_letters(session) == bound  # the bound, exactly
        kept = session.scalar(
            select(func.count()).where(DeadLetter.payload["queue"].astext == queue)
        )
    assert kept == FLOOD_ROOM

    lines = [
        line
        for line in worker.log_path.read_text(errors="replace").splitlines()
        if f"queue {queue}" in line or "was not kept" in line
    ]
    # One line per kind (the poison, the bound) a minute, each with its count.
    assert 2 <= len(lines) <= 2 * (2 + int(elapsed // 60)), lines
    assert worker.alive()
