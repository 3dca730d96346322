"""The chaos harness's parts: restartable embedded services, worker subprocesses, the
input, a producer that resends what the transport refused, the sweeper loop, and the
exactly-once measurement. bench/chaos/run.py injects the faults and prints the table."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import Settings
from memwell.db import migrate
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.db.models import Memory, Turn
from memwell.intake.postgres_outbox import accept_turns
from memwell.intake.turns import IngestPayload, TurnIn
from memwell.local.embedded import EmbeddedPostgres, EmbeddedRedis
from memwell.local.session_services import PostgresService
from memwell.local.worker_process import WorkerProcess
from memwell.maintenance.jobs import run_sweep

TENANT = "chaos"
USERS = 20
CHUNK = 50  # turns per producer call
SWEEP_AFTER_S = 15.0
VISIBILITY_S = 60  # the smallest the settings allow: a killed main's tasks return after it


def make_input(n: int) -> list[TurnIn]:
    """Deterministic turns with known ids; every 10th is an assistant turn (kept, not
    remembered) and contents repeat per user, so dedup and reinforcement are exercised."""
    turns = []
    period = min(97, max(3, n // USERS // 2))  # each user repeats some of what they say
    for i in range(n):
        user = f"user-{i % USERS:02d}"
        k = (i // USERS) % period
        turns.append(
            TurnIn(
                id=f"turn-{i:05d}",
                user_id=user,
                session_id=f"{user}-s{i // (USERS * 25)}",
                role="assistant" if i % 10 == 9 else "user",
                content=f"{user} note {k}: I keep item {k * 7 % 113} in drawer {k % 11}.",
                created_at=datetime(2025, 1, 1, tzinfo=UTC),
            )
        )
    return turns


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Services:
    """Postgres and Valkey the harness may stop and restart."""

    root: Path
    pg: EmbeddedPostgres = field(init=False)
    valkey: EmbeddedRedis = field(init=False)
    pg_url: str = ""
    redis_url: str = ""

    def __post_init__(self) -> None:
        self.pg = EmbeddedPostgres(pgdata=self.root / "pgdata", database="chaos_admin")
        self.valkey = EmbeddedRedis(data_dir=self.root / "valkey", port=free_port())

    def start(self) -> None:
        self.pg_url = self.pg.start()
        self.redis_url = self.valkey.start()

    def stop(self) -> None:
        self.valkey.stop()
        self.pg.stop()

    def fresh_database(self, name: str) -> str:
        url = PostgresService(self.pg_url).create_database(name)
        migrate.upgrade(url)
        return url

    def restart_redis(self) -> None:
        self.valkey.stop()
        self.redis_url = self.valkey.start()

    def stop_postgres(self) -> None:
        self.pg.stop()

    def start_postgres(self) -> None:
        self.pg.start()


@dataclass
class Result:
    fault: str
    sent: int
    processed: int
    lost: int
    duplicated: int
    memories: int
    reinforcements: int
    duplicate_memories: int
    drain_s: float
    notes: str = ""
    dead_letters: int = 0
    #: "alive/started" worker main processes at the end, for faults that must not kill
    workers_alive: str = ""
    #: API faults: answers other than success or 503 while Redis was down, and any
    #: non-success answer once it was back
    errors_during: int = 0
    errors_after: int = 0
    #: failover faults: 503 answers, seconds from the fault until a broker write was
    #: acknowledged again, and until the last 503
    refused: int = 0
    resumed_s: float = 0.0
    settled_s: float = 0.0

    @classmethod
    def of(
        cls, fault: str, *, sent: int, counts: dict[str, int], drain_s: float, **extra: Any
    ) -> Result:
        """A fault's row from `measure`'s counts: a user turn marked processed without a
        memory event lost its memory, so it counts as lost."""
        return cls(
            fault=fault,
            sent=sent,
            processed=counts["processed"],
            lost=counts["lost"] + counts["user_turns_without_event"],
            duplicated=counts["duplicated"],
            memories=counts["memories"],
            reinforcements=counts["reinforcements"],
            duplicate_memories=counts["duplicate_memories"],
            drain_s=drain_s,
            **extra,
        )


class Sweeper:
    """The beat sweep, every `every_s`, through the same function the task runs."""

    def __init__(self, sessions: sessionmaker[Session], settings: Settings, redis_url: str):
        self.sessions, self.settings, self.redis_url = sessions, settings, redis_url
        self.stop_event = threading.Event()
        self.runs = 0
        self.redispatched = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop_event.wait(3.0):
            try:
                client = redis.Redis.from_url(self.redis_url)
                report = run_sweep(
                    self.sessions,
                    self.settings,
                    client,
                    broker_url=self.redis_url,
                    now=datetime.now(UTC),
                )
                client.close()
                self.runs += 1
                self.redispatched += report.counts.get("redispatched", 0)
            except Exception:  # Postgres or Redis is down on purpose; try next tick
                continue

    def __enter__(self) -> Sweeper:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop_event.set()
        self.thread.join(timeout=30)


def worker_env(db_url: str, redis_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": db_url,
            "REDIS_URL": redis_url,
            "MEMWELL_EMBEDDING_PROVIDER": "local",
            "MEMWELL_VISIBILITY_TIMEOUT_S": str(VISIBILITY_S),
            "MEMWELL_SWEEP_AFTER_S": str(SWEEP_AFTER_S),
            "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")])),
        }
    )
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(name, None)
    return env


@contextmanager
def workers(env: dict[str, str], n: int, tag: str) -> Iterator[list[WorkerProcess]]:
    procs = [WorkerProcess(env, concurrency=2, name=f"chaos-{tag}-{i}") for i in range(n)]
    try:
        for p in procs:
            p.start(timeout=180)
        yield procs
    finally:
        for p in procs:
            p.stop()


def send_all(
    turns: list[TurnIn],
    send: Callable[[list[TurnIn]], None],
    *,
    on_progress: Callable[[int], None] | None = None,
    deadline_s: float = 600,
) -> int:
    """Send in chunks; a chunk the transport refuses is resent (same ids) until it is
    acknowledged. Returns how many turns were acknowledged."""
    acked = 0
    for start in range(0, len(turns), CHUNK):
        chunk = turns[start : start + CHUNK]
        give_up = time.monotonic() + deadline_s
        while True:
            try:
                send(chunk)
                break
            except Exception:
                if time.monotonic() > give_up:
                    raise
                time.sleep(0.5)
        acked += len(chunk)
        if on_progress:
            on_progress(acked)
    return acked


def measure(sessions: sessionmaker[Session], ids: list[str], user_ids: set[str]) -> dict[str, int]:
    with sessions() as s:
        processed = s.scalar(
            select(func.count()).where(Turn.tenant == TENANT, Turn.status == "processed")
        )
        events = s.execute(
            text(
                "SELECT tid, count(*) FROM memory_events e, unnest(e.source_turn_ids) tid "
                "WHERE e.tenant = :t AND e.event IN ('add','reinforce') GROUP BY tid"
            ),
            {"t": TENANT},
        ).all()
        memories = s.scalar(select(func.count()).select_from(Memory).where(Memory.tenant == TENANT))
        reinforcements = s.scalar(
            select(func.coalesce(func.sum(Memory.reinforcement_count), 0)).where(
                Memory.tenant == TENANT
            )
        )
        dup_memories = s.scalar(
            text(
                "SELECT count(*) FROM (SELECT 1 FROM memories WHERE tenant = :t "
                "AND deleted_at IS NULL AND superseded_by IS NULL "
                "GROUP BY user_id, content_hash HAVING count(*) > 1) d"
            ),
            {"t": TENANT},
        )
        done_ids = set(
            s.scalars(select(Turn.id).where(Turn.tenant == TENANT, Turn.status == "processed"))
        )
    per_turn = {tid: int(n) for tid, n in events}
    return {
        "processed": int(processed or 0),
        "lost": sum(1 for i in ids if i not in done_ids),
        "duplicated": sum(1 for n in per_turn.values() if n > 1),
        "user_turns_without_event": sum(1 for i in user_ids if i not in per_turn),
        "memories": int(memories or 0),
        "reinforcements": int(reinforcements or 0),
        "duplicate_memories": int(dup_memories or 0),
    }


def expected_counts(turns: list[TurnIn]) -> dict[str, int]:
    """What a fault-free run must produce: one memory per distinct (user, content) of
    user turns, and one reinforcement per repeat."""
    from memwell.core.text import content_hash

    user_turns = [t for t in turns if t.role == "user"]
    memories = len({(t.user_id, content_hash(t.content)) for t in user_turns})
    return {"memories": memories, "reinforcements": len(user_turns) - memories}


def run_wipe_before_workers(
    services: Services, turns: list[TurnIn], *, sweep_after_s: float = 2.0
) -> Result:
    """The outbox proof, deterministic: accept every turn the way POST /v1/turns does
    while no worker runs, wipe Redis (every dispatch is gone), then start the workers.
    Only the sweeper can bring the turns back."""
    db_url = services.fresh_database("chaos_wipe_first")
    client = redis.Redis.from_url(services.redis_url)
    client.flushall()
    engine = make_engine(db_url, pool_size=2)
    sessions = make_sessionmaker(engine)
    started = time.monotonic()
    sent = send_all(
        turns,
        lambda chunk: accept_turns(
            sessions, IngestPayload(tenant=TENANT, turns=chunk), broker_url=services.redis_url
        ),
    )
    client.flushall()
    client.close()
    env = worker_env(db_url, services.redis_url)
    settings = Settings(
        DATABASE_URL=db_url, REDIS_URL=services.redis_url, MEMWELL_SWEEP_AFTER_S=sweep_after_s
    )
    with workers(env, 2, "wipefirst"), Sweeper(sessions, settings, services.redis_url) as sweeper:
        _wait(lambda: _processed(sessions) >= len(turns), timeout=300)
        counts = measure(sessions, [t.id for t in turns], {t.id for t in turns if t.role == "user"})
    engine.dispose()
    return Result.of(
        "redis-wipe-first",
        sent=sent,
        counts=counts,
        drain_s=time.monotonic() - started,
        notes=f"sweeps={sweeper.runs} redispatched={sweeper.redispatched}",
    )


def _processed(sessions: sessionmaker[Session]) -> int:
    try:
        with sessions() as s:
            return int(
                s.scalar(
                    select(func.count()).where(Turn.tenant == TENANT, Turn.status == "processed")
                )
                or 0
            )
    except Exception:  # Postgres is down on purpose
        return 0


def _wait(probe: Callable[[], bool], *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            return  # the table shows what was lost
        time.sleep(1.0)


def wait_drain(
    sessions: sessionmaker[Session], expected: int, *, timeout: float, stall_s: float = 150
) -> None:
    """Until every turn is processed, or the count has not moved for `stall_s` (longer
    than the visibility timeout plus the sweep delay: nothing is coming back)."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while (done := _processed(sessions)) < expected:
        now = time.monotonic()
        if done != last:
            last, since = done, now
        if now > deadline or now - since > stall_s:
            return
        time.sleep(1.0)
