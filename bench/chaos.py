"""Chaos harness: nothing acknowledged is lost, nothing is consolidated twice.

Real processes: an embedded Postgres and an embedded Valkey (AOF on) owned by the
harness, two or more Celery worker subprocesses, and the sweeper run every few
seconds through the same function beat calls. For each fault it ingests the same
input (N turns over 20 users, with known ids) into a fresh database, injects the
fault during ingestion, waits for the backlog to drain, and checks:
- every acknowledged turn id is processed, exactly once (one memory event per user
  turn: a second processing would add a second `add`/`reinforce` event);
- the memory count and the total reinforcement count equal the fault-free control
  run's;
- no two live memories share (tenant, user, content hash).

    python -m bench.chaos                      # 5,000 turns, every fault
    python -m bench.chaos --turns 500 --faults sigkill

Faults:
- sigkill: SIGKILL a random worker's main process or one of its pool children, every
  few seconds during the backlog (killed main processes are restarted);
- redis-restart: stop Valkey (SIGTERM) and start it on the same port and data dir,
  mid-ingestion; the AOF brings the queues back;
- postgres-stop: stop Postgres for 60 s mid-ingestion, then start it again;
- redis-wipe (outbox): turns are accepted the way POST /v1/turns does (persisted
  first), then Redis loses everything (FLUSHALL); the sweeper re-dispatches.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psutil
import redis
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from memwell import migrate
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.db.models import Memory, Turn
from memwell.embedded import EmbeddedPostgres, EmbeddedRedis
from memwell.enqueue import enqueue_turns
from memwell.maintenance.jobs import run_sweep
from memwell.outbox import accept_turns
from memwell.settings import Settings
from memwell.turns import IngestPayload, TurnIn
from tests.services import PostgresService
from tests.worker_process import WorkerProcess

TENANT = "chaos"
USERS = 20
CHUNK = 50  # turns per producer call
SWEEP_AFTER_S = 15.0
VISIBILITY_S = 60  # the smallest the settings allow: a killed main's tasks return after it

FAULTS = ("sigkill", "redis-restart", "postgres-stop", "redis-wipe")


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


def _sigkill_loop(
    procs: list[WorkerProcess], stop: threading.Event, rng: random.Random
) -> list[str]:
    log: list[str] = []
    while not stop.wait(rng.uniform(2.0, 4.0)):
        victim = rng.choice(procs)
        if not victim.alive() or victim.process is None:
            continue
        main = psutil.Process(victim.process.pid)
        children = main.children()
        if children and rng.random() < 0.6:
            rng.choice(children).send_signal(signal.SIGKILL)
            log.append("child")
        else:
            main.send_signal(signal.SIGKILL)
            for child in children:  # a real crash of the node takes its pool with it
                child.send_signal(signal.SIGKILL)
            victim.process.wait()
            victim.process = None
            victim.start(timeout=180)
            log.append("main")
    return log


def run_one(
    services: Services,
    fault: str,
    turns: list[TurnIn],
    *,
    n_workers: int = 2,
    drain_timeout_s: float = 900,
    seed: int = 7,
    progress: bool = True,
) -> Result:
    db_url = services.fresh_database(f"chaos_{fault.replace('-', '_')}")
    redis.Redis.from_url(services.redis_url).flushall()
    env = worker_env(db_url, services.redis_url)
    settings = Settings(
        DATABASE_URL=db_url, REDIS_URL=services.redis_url, MEMWELL_SWEEP_AFTER_S=SWEEP_AFTER_S
    )
    engine = make_engine(db_url, pool_size=2)
    sessions = make_sessionmaker(engine)
    rng = random.Random(seed)
    ids = [t.id for t in turns]
    user_ids = {t.id for t in turns if t.role == "user"}
    notes = ""

    outbox = fault == "redis-wipe"

    def send(chunk: list[TurnIn]) -> None:
        if outbox:
            accept_turns(
                sessions, IngestPayload(tenant=TENANT, turns=chunk), broker_url=services.redis_url
            )
        else:
            enqueue_turns(chunk, tenant=TENANT, broker_url=services.redis_url)

    fired = threading.Event()
    third = len(turns) // 3

    def on_progress(acked: int) -> None:
        if progress and acked % 500 == 0:
            print(f"    {fault}: {acked}/{len(turns)} acknowledged", file=sys.stderr, flush=True)
        if acked >= third and not fired.is_set():
            fired.set()

    with (
        workers(env, n_workers, fault.replace("-", "")) as procs,
        Sweeper(sessions, settings, services.redis_url) as sweeper,
    ):
        stop = threading.Event()
        fault_log: list[str] = []

        def inject() -> None:
            fired.wait()
            if fault == "sigkill":
                fault_log.extend(_sigkill_loop(procs, stop, rng))
            elif fault == "redis-restart":
                services.restart_redis()
                fault_log.append("restarted")
            elif fault == "postgres-stop":
                services.stop_postgres()
                stop.wait(60)
                services.start_postgres()
                fault_log.append("stopped 60 s")
            elif fault == "redis-wipe":
                redis.Redis.from_url(services.redis_url).flushall()
                fault_log.append("flushall")

        injector = threading.Thread(target=inject, daemon=True)
        started = time.monotonic()
        injector.start()
        sent = send_all(turns, send, on_progress=on_progress)
        if fault == "sigkill":
            # Keep killing while the backlog drains, then let the survivors finish.
            _wait(lambda: _processed(sessions) >= len(turns) * 0.8, timeout=drain_timeout_s)
            stop.set()
        injector.join()
        stop.set()
        for p in procs:  # a killed main process is restarted by the loop; make sure
            if not p.alive():
                p.start(timeout=180)
        _wait(lambda: _processed(sessions) >= len(turns), timeout=drain_timeout_s)
        drain_s = time.monotonic() - started
        counts = measure(sessions, ids, user_ids)
        notes = ",".join(sorted(set(fault_log)))
        notes += f"; sweeps={sweeper.runs} redispatched={sweeper.redispatched}"
        if fault == "sigkill":
            kills = f"kills: main={fault_log.count('main')} child={fault_log.count('child')}"
            notes = f"{kills}; {notes}"
    engine.dispose()
    return Result(
        fault=fault,
        sent=sent,
        processed=counts["processed"],
        # A user turn marked processed without a memory event lost its memory.
        lost=counts["lost"] + counts["user_turns_without_event"],
        duplicated=counts["duplicated"],
        memories=counts["memories"],
        reinforcements=counts["reinforcements"],
        duplicate_memories=counts["duplicate_memories"],
        drain_s=drain_s,
        notes=notes,
    )


def expected_counts(turns: list[TurnIn]) -> dict[str, int]:
    """What a fault-free run must produce: one memory per distinct (user, content) of
    user turns, and one reinforcement per repeat."""
    from memwell.text import content_hash

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
    return Result(
        fault="redis-wipe-first",
        sent=sent,
        processed=counts["processed"],
        lost=counts["lost"] + counts["user_turns_without_event"],
        duplicated=counts["duplicated"],
        memories=counts["memories"],
        reinforcements=counts["reinforcements"],
        duplicate_memories=counts["duplicate_memories"],
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


def print_table(results: list[Result], control: Result) -> None:
    head = (
        f"{'fault':<15}{'sent':>6}{'processed':>11}{'lost':>6}{'duplicated':>12}"
        f"{'memories':>10}{'reinforced':>12}{'dup mem':>9}{'drain s':>9}  verdict"
    )
    print(head)
    print("-" * len(head))
    for r in [control, *results]:
        ok = (
            r.lost == 0
            and r.duplicated == 0
            and r.duplicate_memories == 0
            and r.memories == control.memories
            and r.reinforcements == control.reinforcements
        )
        print(
            f"{r.fault:<15}{r.sent:>6}{r.processed:>11}{r.lost:>6}{r.duplicated:>12}"
            f"{r.memories:>10}{r.reinforcements:>12}{r.duplicate_memories:>9}{r.drain_s:>9.1f}"
            f"  {'OK' if ok else 'FAIL'}"
        )
    for r in results:
        print(f"  {r.fault}: {r.notes}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--faults", default=",".join(FAULTS))
    args = parser.parse_args(argv)
    faults = [f for f in args.faults.split(",") if f]
    unknown = set(faults) - set(FAULTS)
    if unknown:
        parser.error(f"unknown faults {sorted(unknown)}; choose from {FAULTS}")
    turns = make_input(args.turns)
    services = Services(Path(tempfile.mkdtemp(prefix="memwell-chaos-")))
    services.start()
    try:
        print(f"control run: {len(turns)} turns, {USERS} users, no fault", file=sys.stderr)
        control = run_one(services, "control", turns, n_workers=args.workers)
        results = []
        for fault in faults:
            print(f"fault: {fault}", file=sys.stderr)
            results.append(run_one(services, fault, turns, n_workers=args.workers))
        print_table(results, control)
        ok = all(
            r.lost == 0 and r.duplicated == 0 and r.memories == control.memories for r in results
        )
        return 0 if ok else 1
    finally:
        services.stop()


if __name__ == "__main__":
    raise SystemExit(main())
