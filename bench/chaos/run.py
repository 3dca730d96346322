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

    python -m bench.chaos.run                      # 5,000 turns, every fault
    python -m bench.chaos.run --turns 500 --faults sigkill

Faults:
- sigkill: SIGKILL a random worker's main process or one of its pool children, every
  few seconds during the backlog (killed main processes are restarted);
- redis-restart: stop Valkey (SIGTERM) and start it on the same port and data dir,
  mid-ingestion; the AOF brings the queues back;
- postgres-stop: stop Postgres for 60 s mid-ingestion, then start it again;
- redis-wipe (outbox): turns are accepted the way POST /v1/turns does (persisted
  first), then Redis loses everything (FLUSHALL); the sweeper re-dispatches;
- redis-outage: the whole input queued, then Valkey stopped for a few seconds, again
  and again (--outages, --outage-s) while the backlog drains; the worker processes
  must all be the original ones at the end, with no dead letter;
- redis-restart-api: a real API process under traffic (turns, searches, context)
  while Valkey stops and starts; no answer but success or 503 while it is down, and
  only successes once it is back (bench/chaos/redis_faults.py);
- sentinel-failover: Redis behind Sentinel (a primary, a replica, three sentinels),
  the API, two workers and beat; --turns turns through POST /v1/turns,
  enqueue_turn and POST /v1/chat while the primary is SIGKILLed; only success or
  503 + Retry-After during the switch, the 503s and the seconds until broker writes
  were acknowledged again (bench/chaos/sentinel_failover.py).

    python -m bench.chaos.run --faults redis-outage,redis-restart-api --outages 5
    python -m bench.chaos.run --faults redis-outage --repeat 5 --no-control
    python -m bench.chaos.run --faults sentinel-failover --turns 2000 --no-control
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import redis

from bench.chaos.harness import (
    SWEEP_AFTER_S,
    TENANT,
    USERS,
    Result,
    Services,
    Sweeper,
    _processed,
    _wait,
    expected_counts,
    make_input,
    measure,
    send_all,
    wait_drain,
    worker_env,
    workers,
)
from bench.chaos.redis_faults import run_outage_backlog, run_restart_with_traffic
from bench.chaos.sentinel_failover import run_sentinel_failover
from memwell.core.settings import Settings
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.intake.enqueue import enqueue_turns
from memwell.intake.postgres_outbox import accept_turns
from memwell.intake.turns import IngestPayload, TurnIn
from memwell.local.worker_process import WorkerProcess

FAULTS = (
    "sigkill",
    "redis-restart",
    "postgres-stop",
    "redis-wipe",
    "redis-outage",
    "redis-restart-api",
    "sentinel-failover",
)
#: faults whose input is their own API traffic, not the shared turns
TRAFFIC_FAULTS = ("redis-restart-api", "sentinel-failover")


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
        wait_drain(sessions, len(turns), timeout=drain_timeout_s)
        drain_s = time.monotonic() - started
        counts = measure(sessions, ids, user_ids)
        notes = ",".join(sorted(set(fault_log)))
        notes += f"; sweeps={sweeper.runs} redispatched={sweeper.redispatched}"
        if fault == "sigkill":
            kills = f"kills: main={fault_log.count('main')} child={fault_log.count('child')}"
            notes = f"{kills}; {notes}"
    engine.dispose()
    return Result.of(
        fault,
        sent=sent,
        counts=counts,
        drain_s=drain_s,
        notes=notes,
    )


def verdict(r: Result, control: Result) -> bool:
    """Nothing lost or doubled; the same memories as the control run (same input);
    no dead letter, no dead worker and no unexpected API error where those apply."""
    ok = r.lost == 0 and r.duplicated == 0 and r.duplicate_memories == 0
    # A chat refused during a failover is kept as a dead letter for replay, by design.
    letters_ok = (
        r.dead_letters <= r.refused if r.fault == "sentinel-failover" else not r.dead_letters
    )
    ok = ok and letters_ok and r.errors_during == 0 and r.errors_after == 0
    if r.workers_alive:
        alive, started = r.workers_alive.split("/")
        ok = ok and alive == started
    if r.fault not in TRAFFIC_FAULTS:  # their input is their own traffic
        ok = ok and r.memories == control.memories and r.reinforcements == control.reinforcements
    return ok


def print_table(results: list[Result], control: Result) -> None:
    head = (
        f"{'fault':<18}{'sent':>6}{'processed':>11}{'lost':>6}{'duplicated':>12}"
        f"{'memories':>10}{'reinforced':>12}{'dup mem':>9}{'dead':>6}{'alive':>7}"
        f"{'err':>8}{'drain s':>9}  verdict"
    )
    print(head)
    print("-" * len(head))
    for r in [control, *results]:
        errors = f"{r.errors_during}/{r.errors_after}" if r.fault in TRAFFIC_FAULTS else ""
        print(
            f"{r.fault:<18}{r.sent:>6}{r.processed:>11}{r.lost:>6}{r.duplicated:>12}"
            f"{r.memories:>10}{r.reinforcements:>12}{r.duplicate_memories:>9}{r.dead_letters:>6}"
            f"{r.workers_alive:>7}{errors:>8}{r.drain_s:>9.1f}"
            f"  {'OK' if verdict(r, control) else 'FAIL'}"
        )
    for r in results:
        print(f"  {r.fault}: {r.notes}")
    if any(r.fault in TRAFFIC_FAULTS for r in results):
        print("  err: API answers other than success/503 while Redis was down / any error after")
    for r in results:
        if r.fault == "sentinel-failover":
            print(f"  sentinel-failover: {r.refused} x 503, writes resumed in {r.resumed_s:.1f} s, "
                  f"the last 503 at {r.settled_s:.1f} s")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--outages", type=int, default=5, help="redis-outage: how many")
    parser.add_argument("--outage-s", type=float, default=4.0, help="seconds each lasts")
    parser.add_argument("--no-control", action="store_true", help="skip the control run")
    parser.add_argument("--repeat", type=int, default=1, help="run each fault this many times")
    args = parser.parse_args(argv)
    faults = [f for f in args.faults.split(",") if f]
    unknown = set(faults) - set(FAULTS)
    if unknown:
        parser.error(f"unknown faults {sorted(unknown)}; choose from {FAULTS}")
    turns = make_input(args.turns)
    services = Services(Path(tempfile.mkdtemp(prefix="memwell-chaos-")))
    services.start()
    try:
        if args.no_control:
            control = Result("expected", len(turns), len(turns), 0, 0, 0, 0, 0, 0.0)
            control.memories, control.reinforcements = expected_counts(turns).values()
        else:
            print(f"control run: {len(turns)} turns, {USERS} users, no fault", file=sys.stderr)
            control = run_one(services, "control", turns, n_workers=args.workers)
        results = []
        for fault in [f for f in faults for _ in range(args.repeat)]:
            print(f"fault: {fault}", file=sys.stderr)
            if fault == "redis-outage":
                result = run_outage_backlog(
                    services, turns, outages=args.outages, outage_s=args.outage_s,
                    n_workers=args.workers,
                )  # fmt: skip
            elif fault == "sentinel-failover":
                result = run_sentinel_failover(services, turns=args.turns, n_workers=args.workers)
            elif fault == "redis-restart-api":
                result = run_restart_with_traffic(
                    services, outage_s=args.outage_s, n_workers=args.workers
                )
            else:
                result = run_one(services, fault, turns, n_workers=args.workers)
            results.append(result)
            print_table(results, control)  # as it goes: a later crash keeps these rows
        print_table(results, control)
        return 0 if all(verdict(r, control) for r in results) else 1
    finally:
        services.stop()


if __name__ == "__main__":
    raise SystemExit(main())
