"""The enqueue inbox: a payload stays in Redis until a worker persisted its turns; the
sweeper re-sends stale ones, each once even with two sweepers; a persisted payload
leaves no entry. Real Redis, real worker."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.db.models import Turn
from memwell.intake import redis_inbox
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from memwell.maintenance.sweep import resend_stale_inbox


def test_stale_payloads_are_claimed_once(redis_url: str, ids: dict[str, str]) -> None:
    client = redis.Redis.from_url(redis_url)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    tag = ids["tenant"]
    with client.pipeline(transaction=True) as pipe:
        for i in range(40):
            redis_inbox.stage(pipe, f"{tag}-{i}", b'{"n": %d}' % i, now=t0.timestamp())
        pipe.execute()
    early = resend_stale_inbox(
        client, older_than_s=300, now=t0 + timedelta(seconds=10), send=lambda i, b: None, limit=100
    )
    assert early == 0

    sent: list[str] = []
    lock = threading.Lock()

    def send(task_id: str, body: bytes) -> None:
        with lock:
            sent.append(task_id)

    later = t0 + timedelta(minutes=6)
    barrier = threading.Barrier(2)

    def sweep() -> None:
        barrier.wait()
        for _ in range(10):
            resend_stale_inbox(client, older_than_s=300, now=later, send=send, limit=7)

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    mine = sorted(s for s in sent if s.startswith(tag))
    assert mine == sorted(f"{tag}-{i}" for i in range(40))  # each exactly once
    for i in range(40):
        redis_inbox.done(client, f"{tag}-{i}")
    assert client.hget(redis_inbox.INBOX_KEY, f"{tag}-0") is None
    client.close()


def test_persisted_payload_leaves_no_inbox_entry(
    stack_env: dict[str, str], worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    client = redis.Redis.from_url(stack_env["REDIS_URL"])
    before = set(client.hkeys(redis_inbox.INBOX_KEY))
    turn_id = memwell.enqueue_turn(
        user_id=ids["user"], session_id="s", content="inbox check", tenant=ids["tenant"]
    )

    def persisted() -> bool:
        with db() as s:
            return s.scalar(select(Turn.id).where(Turn.id == turn_id)) is not None

    wait_for(persisted, timeout=60)
    wait_for(lambda: set(client.hkeys(redis_inbox.INBOX_KEY)) <= before, timeout=30, what="cleared")
    client.close()
