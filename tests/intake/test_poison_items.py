"""A raw item on a queue's list that is not a message envelope: the worker keeps it as a
dead letter with its bytes, logs none of its content, and goes on consuming the same
queue in the same process (Kombu's read of such an item used to stop the worker)."""

from __future__ import annotations

import base64
import json
import string
import uuid
from collections.abc import Callable

import orjson
import pytest
import redis
from click.testing import CliRunner
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.queues import Queue, TaskName
from memwell.db.models import DeadLetter, Turn
from memwell.intake.dead_letters import RAW_BYTES_KEY, replay_dead_letters, replayable
from memwell.intake.task_message import task_message
from memwell.local.cli import main
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from worker.undecodable import UNREADABLE_TASK

_B64_ALPHABET = set(string.ascii_letters + string.digits + "+/")


def _envelope(canary: str, queue: str) -> dict[str, object]:
    """A real task message whose id carries the canary: its headers are in clear."""
    _, message = task_message(TaskName.INGEST_TURNS, b'{"payload": {}}', queue, task_id=canary)
    envelope: dict[str, object] = orjson.loads(message)
    return envelope


def _bad_base64(canary: str, queue: str) -> bytes:
    # A count of base64 characters one more than a multiple of 4 cannot decode.
    body = canary + "A" * ((1 - sum(c in _B64_ALPHABET for c in canary)) % 4)
    return orjson.dumps(_envelope(canary, queue) | {"body": body})


def _no_properties(canary: str, queue: str) -> bytes:
    envelope = _envelope(canary, queue)
    del envelope["properties"]
    return orjson.dumps(envelope)


POISON: dict[str, Callable[[str, str], bytes]] = {
    "not JSON": lambda canary, _: f"{{{canary} is not json".encode(),
    "an empty array": lambda _c, _q: b"[]",
    "a bare string": lambda canary, _: json.dumps(canary).encode(),
    "bad base64": _bad_base64,
    "no properties": _no_properties,
}
REASONS = {
    "not JSON": "not JSON",
    "an empty array": "not a message envelope: an array",
    "a bare string": "not a message envelope: a string",
    "bad base64": "unreadable envelope (binascii.Error)",
    "no properties": "no message properties",
}


def _newest_letter(db: sessionmaker[Session]) -> int:
    with db() as session:
        return session.scalar(select(func.max(DeadLetter.id))) or 0


def _letter(db: sessionmaker[Session], raw: bytes, queue: str, after: int) -> DeadLetter | None:
    """The letter kept of `raw` from `queue` since letter `after` (`[]` is no one's own)."""
    with db() as session:
        return session.scalars(
            select(DeadLetter).where(
                DeadLetter.id > after,
                DeadLetter.payload["queue"].astext == queue,
                DeadLetter.payload[RAW_BYTES_KEY].astext == base64.b64encode(raw).decode(),
            )
        ).first()


def _status(db: sessionmaker[Session], tenant: str, turn_id: str) -> str | None:
    with db() as session:
        return session.scalar(select(Turn.status).where(Turn.tenant == tenant, Turn.id == turn_id))


@pytest.mark.parametrize("queue", list(Queue))
def test_poison_items_are_kept_and_the_worker_consumes_on(
    queue: Queue,
    stack_env: dict[str, str],
    worker: WorkerProcess,
    db: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    assert worker.process is not None
    pid = worker.process.pid
    canary = f"poisoncanary{uuid.uuid4().hex}"
    items = {case: make(canary, queue.value) for case, make in POISON.items()}
    # A good task behind them on the same list: this queue goes on being consumed.
    turn_id = f"after-poison-{uuid.uuid4().hex}"
    turn = {"id": turn_id, "user_id": ids["user"], "session_id": "s", "content": "still here"}
    good = orjson.dumps({"payload": {"v": 1, "tenant": ids["tenant"], "turns": [turn]}})
    _, good_message = task_message(TaskName.INGEST_TURNS, good, queue.value)
    after = _newest_letter(db)
    client = redis.Redis.from_url(stack_env["REDIS_URL"])
    try:
        # LPUSH, BRPOP: the first pushed is consumed first, the good task last.
        client.lpush(queue.value, *items.values(), good_message)
    finally:
        client.close()

    def kept(raw: bytes) -> DeadLetter | None:
        assert worker.alive(), f"the worker exited:\n{worker.log()}"
        return _letter(db, raw, queue.value, after)

    for case, raw in items.items():
        letter = wait_for(lambda r=raw: kept(r), timeout=60, what=f"{case} kept")
        assert base64.b64decode(letter.payload[RAW_BYTES_KEY]) == raw  # the bytes, whole
        assert letter.task_name == UNREADABLE_TASK and letter.tenant is None
        assert letter.error == f"not a message: {REASONS[case]}"
        assert canary not in letter.error
        assert not replayable(letter.payload)
    wait_for(
        lambda: _status(db, ids["tenant"], turn_id) == "processed",
        timeout=60,
        what="the good task after the poison",
    )

    assert worker.alive() and worker.process.pid == pid  # the same process, never restarted
    log = worker.log_path.read_text(errors="replace")
    assert canary not in log
    assert "Unrecoverable error" not in log
    for reason in REASONS.values():
        assert f"a raw item on queue {queue.value} is not a message ({reason})" in log


def test_a_raw_letter_is_listed_but_never_replayed(
    stack_env: dict[str, str], worker: WorkerProcess, db: sessionmaker[Session]
) -> None:
    """Its bytes are no task's arguments: a replay would only make another letter."""
    raw = b"[]" + uuid.uuid4().hex.encode()
    after = _newest_letter(db)
    client = redis.Redis.from_url(stack_env["REDIS_URL"])
    try:
        client.lpush(Queue.INGEST.value, raw)
    finally:
        client.close()
    letter = wait_for(
        lambda: _letter(db, raw, Queue.INGEST.value, after), timeout=60, what="the raw item kept"
    )
    listed = CliRunner().invoke(main, ["dlq", "list", "--limit", "1000"])
    assert listed.exit_code == 0, listed.output
    [line] = [x for x in listed.output.splitlines() if x.startswith(f"{letter.id:>6}  ")]
    assert "open (raw bytes: not replayable)" in line
    sent: list[str] = []
    with db.begin() as session:
        replayed = replay_dead_letters(session, lambda name, _: sent.append(name), ids=[letter.id])
    assert replayed == []
    assert sent == []
    with db() as session:
        kept = session.get(DeadLetter, letter.id)
        assert kept is not None and kept.replayed_at is None
