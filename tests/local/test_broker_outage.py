"""A worker outlives broker outages: a real Celery worker on its own Valkey (AOF on)
with a backlog queued; Valkey is stopped until the worker has noticed, then started
again on the same port and data dir. The worker stays up, announces itself again,
consumes the whole backlog, and leaves no dead letter. The session's shared Redis
and worker are not touched.

The broker may stop just after moving a message to `unacked` for the worker, whose
reply then never arrives: Celery's visibility timeout (an hour) gives it back, and
until then the sweeper is what re-dispatches its turns, as beat runs it in service.
The test runs the same sweep while it waits, with a short age."""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from memwell.core import worker_presence
from memwell.core.queues import Queue
from memwell.core.settings import get_settings
from memwell.db.models import DeadLetter, Turn
from memwell.intake.enqueue import enqueue_turns
from memwell.intake.turns import TurnIn
from memwell.local.embedded import EmbeddedRedis
from memwell.local.reaper import reaper
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from memwell.maintenance.jobs import run_sweep

TURNS = 400
OUTAGES = 2
#: a pending turn this old is re-dispatched by the sweep the test runs (beat's job)
SWEEP_AFTER_S = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(data_dir=tmp_path / "valkey", port=free_port(), appendonly=True)
    server.start()
    assert server.pid is not None
    reaper().watch(server.pid)
    yield server
    pid = server.pid
    server.stop()
    if pid is not None:
        reaper().forget(pid)


@pytest.fixture
def outage_worker(stack_env: dict[str, str], own_broker: EmbeddedRedis) -> Iterator[WorkerProcess]:
    env = {**stack_env, "REDIS_URL": f"redis://127.0.0.1:{own_broker.port}/0"}
    process = WorkerProcess(env, concurrency=2, name="outage")
    process.start()
    yield process
    process.stop()


def _counts(db: sessionmaker[Session], tenant: str) -> tuple[int, int]:
    with db() as session:
        processed = session.scalar(
            select(func.count()).where(Turn.tenant == tenant, Turn.status == "processed")
        )
        letters = session.scalar(
            select(func.count()).select_from(DeadLetter).where(DeadLetter.tenant == tenant)
        )
    return int(processed or 0), int(letters or 0)


def _failed_reconnects(log: Path) -> int:
    return log.read_text(errors="replace").count("Cannot connect to")


def _queued(client: redis.Redis) -> int:
    return sum(int(client.llen(q.value)) for q in Queue)


def _turns(user: str, session_id: str) -> list[TurnIn]:
    return [
        TurnIn(
            user_id=user,
            session_id=session_id,
            role="user",
            content=f"I keep spare key number {i} in drawer {i % 7}.",
            created_at=datetime(2025, 1, 1, tzinfo=UTC),
        )
        for i in range(TURNS)
    ]


def _letters(db: sessionmaker[Session], tenant: str) -> list[tuple[str, str]]:
    """The tenant's dead letters, as (task, error): what a failure message shows."""
    with db() as session:
        rows = session.execute(
            select(DeadLetter.task_name, DeadLetter.error).where(DeadLetter.tenant == tenant)
        )
        return [(str(name), str(error)) for name, error in rows]


def test_worker_survives_broker_outages_and_consumes_after(
    own_broker: EmbeddedRedis,
    outage_worker: WorkerProcess,
    db: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    url = outage_worker.env["REDIS_URL"]
    tenant = ids["tenant"]
    client = redis.Redis.from_url(url)
    wait_for(
        lambda: outage_worker.hostname in worker_presence.alive(client),
        timeout=30,
        what="the worker's presence key",
    )
    enqueue_turns(_turns(ids["user"], ids["session"]), tenant=tenant, broker_url=url, chunk_size=10)
    log = outage_worker.log_path
    for _ in range(OUTAGES):
        failed_before = _failed_reconnects(log)
        own_broker.stop()
        # The outage lasts until the worker has failed to reconnect at least once more.
        wait_for(
            lambda n=failed_before: _failed_reconnects(log) > n,
            timeout=60,
            what="the worker to notice the outage",
        )
        own_broker.start()
        assert outage_worker.alive(), outage_worker.log()
        # The AOF brought back the key of before the outage: only a new one counts.
        client.delete(f"{worker_presence.KEY_PREFIX}{outage_worker.hostname}")
        wait_for(
            lambda: outage_worker.hostname in worker_presence.alive(client),
            timeout=60,
            what="the worker to rejoin",
        )

    sweeps = get_settings().model_copy(update={"sweep_after_s": SWEEP_AFTER_S})
    last_sweep = time.monotonic()

    def processed_all() -> bool:
        nonlocal last_sweep
        if _counts(db, tenant)[0] == TURNS:
            return True
        if time.monotonic() - last_sweep >= SWEEP_AFTER_S:
            run_sweep(db, sweeps, client, broker_url=url, now=datetime.now(UTC))
            last_sweep = time.monotonic()
        return False

    wait_for(processed_all, timeout=240, what="every turn processed")
    wait_for(lambda: _queued(client) == 0, timeout=120, what="empty queues")
    text = log.read_text(errors="replace")
    assert outage_worker.alive()
    assert "Unrecoverable error" not in text
    assert _counts(db, tenant) == (TURNS, 0), _letters(db, tenant)  # all processed, none dead
    # What the worker held when the broker went away was put back on reconnect, and ran.
    # One message per outage may stay in `unacked`: one the broker moved there as it
    # stopped, whose reply never reached the worker. Kombu restores those after the
    # visibility timeout (at least once), and every turn above is processed already.
    wait_for(
        lambda: int(client.hlen("unacked")) <= OUTAGES, timeout=60, what="unacked messages back"
    )
    client.close()


def test_a_stopped_worker_withdraws_its_presence(
    own_broker: EmbeddedRedis, outage_worker: WorkerProcess
) -> None:
    client = redis.Redis.from_url(outage_worker.env["REDIS_URL"])
    wait_for(lambda: outage_worker.hostname in worker_presence.alive(client), timeout=30)
    assert outage_worker.process is not None
    outage_worker.process.send_signal(signal.SIGTERM)  # a warm shutdown
    outage_worker.process.wait(timeout=60)
    assert outage_worker.hostname not in worker_presence.alive(client)
    client.close()
