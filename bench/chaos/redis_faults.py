"""Broker faults the workers and the API must ride out, for bench/chaos/run.py.

- redis-outage: the whole input is queued, then Valkey is stopped for a few seconds,
  several times, while the backlog drains. The worker processes must be the same
  ones at the end (none exited), every turn processed once, and no dead letter.
- redis-restart-api: a real API process under steady traffic (turns, searches,
  context) while Valkey stops and starts again. While it is down, every answer is a
  success or 503; once it answers again, every answer is a success. Every turn the
  API acknowledged is processed.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import redis
from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session, sessionmaker

from bench.chaos.harness import (
    SWEEP_AFTER_S,
    TENANT,
    Result,
    Services,
    Sweeper,
    _processed,
    free_port,
    measure,
    send_all,
    wait_drain,
    worker_env,
    workers,
)
from memwell.core import worker_presence
from memwell.core.settings import Settings
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.intake.enqueue import enqueue_turns
from memwell.intake.turns import TurnIn
from memwell.local.waiting import wait_for


def dead_letters(sessions: sessionmaker[Session]) -> int:
    with sessions() as s:
        return int(s.scalar(text("SELECT count(*) FROM dead_letters")) or 0)


def _rejoined(client: redis.Redis, hostnames: list[str]) -> bool:
    try:
        return set(hostnames) <= set(worker_presence.alive(client))
    except redis.RedisError:
        return False


def _outage(services: Services, seconds: float, hostnames: list[str]) -> None:
    """Valkey down for `seconds`, then up until every worker has announced itself again
    (the keys of before the outage, restored by the AOF, are deleted first)."""
    services.valkey.stop()
    time.sleep(seconds)  # the fault itself: how long the broker stays away
    services.valkey.start()
    client = redis.Redis.from_url(services.redis_url)
    try:
        client.delete(*[f"{worker_presence.KEY_PREFIX}{h}" for h in hostnames])
        wait_for(lambda: _rejoined(client, hostnames), timeout=120, what="workers to rejoin")
    finally:
        client.close()


def _fresh_store(
    services: Services, name: str
) -> tuple[str, Settings, Engine, sessionmaker[Session]]:
    """A new database and an empty Redis for one fault; the engine is the caller's to
    dispose of."""
    db_url = services.fresh_database(name)
    redis.Redis.from_url(services.redis_url).flushall()
    settings = Settings(
        DATABASE_URL=db_url, REDIS_URL=services.redis_url, MEMWELL_SWEEP_AFTER_S=SWEEP_AFTER_S
    )
    engine = make_engine(db_url, pool_size=2)
    return db_url, settings, engine, make_sessionmaker(engine)


def run_outage_backlog(
    services: Services,
    turns: list[TurnIn],
    *,
    outages: int = 5,
    outage_s: float = 4.0,
    n_workers: int = 2,
    drain_timeout_s: float = 900,
) -> Result:
    db_url, settings, engine, sessions = _fresh_store(services, "chaos_redis_outage")
    ids = [t.id for t in turns]
    started = time.monotonic()
    backlogs: list[int] = []
    env = worker_env(db_url, services.redis_url)
    with (
        workers(env, n_workers, "outage") as procs,
        Sweeper(sessions, settings, services.redis_url) as sweeper,
    ):
        mains = [p.process.pid for p in procs if p.process is not None]

        def send(chunk: list[TurnIn]) -> None:
            enqueue_turns(chunk, tenant=TENANT, broker_url=services.redis_url)

        sent = send_all(turns, send)
        for _ in range(outages):
            done = _processed(sessions)
            backlogs.append(len(turns) - done)
            _outage(services, outage_s, [p.hostname for p in procs])
            # Consuming again, not just connected: the count moves before the next one.
            _wait_progress(sessions, done)
        wait_drain(sessions, len(turns), timeout=drain_timeout_s)
        drain_s = time.monotonic() - started
        same = [p.process.pid if p.process else None for p in procs] == mains
        alive = sum(p.alive() for p in procs) if same else 0
        unrecoverable = sum("Unrecoverable error" in p.log_path.read_text() for p in procs)
        counts = measure(sessions, ids, {t.id for t in turns if t.role == "user"})
        letters = dead_letters(sessions)
    engine.dispose()
    return Result.of(
        "redis-outage",
        sent=sent,
        counts=counts,
        drain_s=drain_s,
        dead_letters=letters,
        workers_alive=f"{alive}/{len(procs)}",
        notes=(
            f"{outages} outages of {outage_s:.0f} s; unprocessed turns at each: "
            f"{','.join(map(str, backlogs))}; unrecoverable={unrecoverable}; "
            f"sweeps={sweeper.runs} redispatched={sweeper.redispatched}"
        ),
    )


def _wait_progress(sessions: sessionmaker[Session], done: int) -> None:
    wait_for(lambda: _processed(sessions) > done, timeout=120, what="progress")


@dataclass(frozen=True)
class Call:
    started: float
    ended: float
    kind: str
    status: int  # 0: no HTTP answer (connection error, timeout)
    turn_id: str | None = None


class ApiProcess:
    """`memwell api` in a subprocess, auth off, on a free port."""

    def __init__(self, db_url: str, redis_url: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = worker_env(db_url, redis_url)
        env.update(
            {
                "MEMWELL_AUTH_DISABLED": "true",
                "MEMWELL_DEFAULT_TENANT": TENANT,
                "MEMWELL_API_PORT": str(self.port),
                "MEMWELL_RATE_LIMIT_PER_S": "0",
                "MEMWELL_DATA_DIR": tempfile.mkdtemp(prefix="chaos-api-"),
                "MEMWELL_LOG_LEVEL": "WARNING",
            }
        )
        self.log = Path(env["MEMWELL_DATA_DIR"]) / "api.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "memwell", "api"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for(self._ready, timeout=120, interval=0.2, what="the API")

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"the API exited:\n{self.log.read_text()[-3000:]}")
        try:
            return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _requests(worker: int) -> Callable[[int], tuple[str, str, dict[str, object], str | None]]:
    """The i-th request of one traffic thread: kind, path, body, turn id."""

    def build(i: int) -> tuple[str, str, dict[str, object], str | None]:
        user = f"api-user-{(worker * 7 + i) % 10}"
        kind = ("turns", "search", "context")[i % 3]
        if kind == "turns":
            turn_id = f"api-{worker}-{i}"
            turn = {
                "id": turn_id,
                "user_id": user,
                "session_id": f"{user}-s",
                "role": "user",
                "content": f"{user} note {i}: I keep item {i * 7 % 113} in drawer {i % 11}.",
                "created_at": datetime(2025, 1, 1, tzinfo=UTC).isoformat(),
            }
            return kind, "/v1/turns", {"turns": [turn]}, turn_id
        if kind == "search":
            search: dict[str, object] = {"user_id": user, "query": "where is item 7"}
            return kind, "/v1/memories/search", search, None
        body: dict[str, object] = {"user_id": user, "session_id": f"{user}-s", "query": "drawer"}
        return kind, "/v1/context", body, None

    return build


def _traffic(url: str, worker: int, stop: threading.Event, calls: list[Call]) -> None:
    build = _requests(worker)
    with httpx.Client(base_url=url, timeout=30) as client:
        for i in itertools.count():
            if stop.is_set():
                return
            kind, path, body, turn_id = build(i)
            started = time.monotonic()
            try:
                status = client.post(path, json=body).status_code
            except httpx.HTTPError:
                status = 0
            calls.append(Call(started, time.monotonic(), kind, status, turn_id))


def _tally(calls: list[Call], down: float, up: float) -> dict[str, int]:
    during = [c for c in calls if c.ended >= down and c.started <= up]
    after = [c for c in calls if c.started > up]
    ok = range(200, 300)
    return {
        "during": len(during),
        "during_503": sum(c.status == 503 for c in during),
        "during_bad": sum(c.status not in ok and c.status != 503 for c in during),
        "after": len(after),
        "after_bad": sum(c.status not in ok for c in after),
    }


def run_restart_with_traffic(
    services: Services,
    *,
    outage_s: float = 3.0,
    before_s: float = 5.0,
    after_s: float = 15.0,
    threads: int = 4,
    n_workers: int = 2,
    drain_timeout_s: float = 600,
) -> Result:
    db_url, settings, engine, sessions = _fresh_store(services, "chaos_redis_restart_api")
    calls: list[Call] = []
    stop = threading.Event()
    env = worker_env(db_url, services.redis_url)
    started = time.monotonic()
    with (
        workers(env, n_workers, "restartapi"),
        Sweeper(sessions, settings, services.redis_url) as sweeper,
    ):
        api = ApiProcess(db_url, services.redis_url)
        try:
            pool = [
                threading.Thread(target=_traffic, args=(api.url, n, stop, calls), daemon=True)
                for n in range(threads)
            ]
            for thread in pool:
                thread.start()
            stop.wait(before_s)  # steady traffic first
            down = time.monotonic()
            services.valkey.stop()
            stop.wait(outage_s)  # the fault itself
            services.valkey.start()
            up = time.monotonic()
            stop.wait(after_s)
            stop.set()
            for thread in pool:
                thread.join(timeout=60)
        finally:
            api.stop()
        accepted = sorted({c.turn_id for c in calls if c.turn_id and 200 <= c.status < 300})
        _wait_accepted(sessions, accepted, timeout=drain_timeout_s)
        counts = measure(sessions, accepted, set(accepted))
        letters = dead_letters(sessions)
    engine.dispose()
    tally = _tally(calls, down, up)
    return Result.of(
        "redis-restart-api",
        sent=len(accepted),
        counts=counts,
        drain_s=time.monotonic() - started,
        dead_letters=letters,
        errors_during=tally["during_bad"],
        errors_after=tally["after_bad"],
        notes=(
            f"{len(calls)} requests; Valkey down {outage_s:.0f} s: {tally['during']} overlapped "
            f"it ({tally['during_503']} answered 503, {tally['during_bad']} other errors); "
            f"{tally['after']} after it, {tally['after_bad']} errors; "
            f"sweeps={sweeper.runs} redispatched={sweeper.redispatched}"
        ),
    )


def _wait_accepted(sessions: sessionmaker[Session], ids: list[str], *, timeout: float) -> None:
    from memwell.db.models import Turn

    def done() -> bool:
        with sessions() as s:
            n = s.scalar(
                select(func.count()).where(
                    Turn.tenant == TENANT, Turn.status == "processed", Turn.id.in_(ids)
                )
            )
        return int(n or 0) >= len(ids)

    try:
        wait_for(done, timeout=timeout, interval=1.0)
    except TimeoutError:
        return  # the table shows what was lost
