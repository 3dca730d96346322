"""sentinel-failover: SIGKILL the Redis primary behind Sentinel while turns flow in
through every door, and count what the producers were told against what was stored.

Real processes on loopback: a Valkey primary, its replica and three sentinels
(memwell/local/sentinel_cluster.py), the API (`memwell api`), two Celery workers and
beat, all given the same `sentinel://` REDIS_URL. Traffic threads send turns through
POST /v1/turns (Postgres first), `enqueue_turn` (the broker; waits for a replica's
ack) and POST /v1/chat (the broker, the same wait). A turn counts as acknowledged on
a 2xx or an enqueue return; a refused one is sent again with the same ids, as a
client would (a chat is not: its next message is a new exchange). Once a share of
the input is acknowledged, the primary is SIGKILLed; the sentinels promote the
replica, and the killed server comes back as the new primary's replica, as its
supervisor would start it again (until then no replica can acknowledge a write, so
the broker doors refuse with 503).

Checked: every acknowledged turn is processed exactly once; every answer is a 2xx or
a 503 with Retry-After, and only 2xx after the last 503 (each client finds the new
primary on its own, so refusals may go on a little after another client's first write
went through); the workers consumed after the failover. Reported: the 503s, and the
seconds from the kill until the first broker write was acknowledged again and until
the last 503.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx
import redis

from bench.chaos.harness import TENANT, Result, Services, _processed, measure, worker_env
from bench.chaos.redis_faults import ApiProcess, _wait_accepted, dead_letters
from memwell.core.errors import ServiceUnavailable
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.intake.enqueue import enqueue_turns
from memwell.local.sentinel_cluster import SentinelCluster
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess

FAULT = "sentinel-failover"
BATCH = 5  # turns per POST /v1/turns or enqueue call
OK = range(200, 300)


@dataclass(frozen=True)
class Answer:
    started: float
    ended: float
    kind: str  # turns, enqueue, chat
    status: int  # enqueue: 200 returned, 503 refused (ServiceUnavailable or Redis down)
    retry_after: bool = True


@dataclass
class Traffic:
    """What the producers sent and were told; shared by the traffic threads."""

    target: int
    answers: list[Answer] = field(default_factory=list)
    acked: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def record(self, answer: Answer, ids: list[str]) -> None:
        with self.lock:
            self.answers.append(answer)
            if answer.status in OK:
                self.acked.extend(ids)
                if len(self.acked) >= self.target:
                    self.stop.set()

    @property
    def n_acked(self) -> int:
        with self.lock:
            return len(self.acked)


def _turn(turn_id: str, user: str, i: int) -> dict[str, str]:
    return {
        "id": turn_id,
        "user_id": user,
        "session_id": f"{user}-s",
        "role": "user",
        "content": f"{user} note {i}: I keep item {i * 7 % 113} in drawer {i % 11}.",
        "created_at": datetime(2025, 1, 1, tzinfo=UTC).isoformat(),
    }


def _send_batch(traffic: Traffic, kind: str, ids: list[str], send: Callable[[], int]) -> None:
    """Send until acknowledged (same ids each time), or until the traffic stops."""
    while not traffic.stop.is_set():
        started = time.monotonic()
        status, retry_after = 0, True
        try:
            status = send()
        except _Refused as refused:
            status, retry_after = 503, refused.retry_after
        except (ServiceUnavailable, redis.ConnectionError, redis.TimeoutError):
            status = 503  # the enqueue client's refusal: nothing acknowledged
        except httpx.HTTPError:
            status = 0
        traffic.record(Answer(started, time.monotonic(), kind, status, retry_after), ids)
        if status in OK:
            return
        time.sleep(0.2)  # a client's back-off; Retry-After asks for more, kept short here


class _Refused(Exception):
    def __init__(self, retry_after: bool) -> None:
        super().__init__("503")
        self.retry_after = retry_after


def _http_status(response: httpx.Response) -> int:
    if response.status_code == 503:
        raise _Refused("retry-after" in response.headers)
    return response.status_code


def _producer(traffic: Traffic, api_url: str, broker_url: str, n: int) -> None:
    with httpx.Client(base_url=api_url, timeout=30) as client:
        for i in itertools.count():
            if traffic.stop.is_set():
                return
            user = f"fo-user-{(n * 7 + i) % 10}"
            kind = ("turns", "enqueue", "chat")[i % 3]
            if kind == "chat":
                _chat(traffic, client, user, f"{n}-{i}", i)
                continue
            batch = [_turn(f"fo-{kind}-{n}-{i}-{k}", user, i * BATCH + k) for k in range(BATCH)]
            ids = [t["id"] for t in batch]
            send = _post_turns(client, batch) if kind == "turns" else _enqueue(batch, broker_url)
            _send_batch(traffic, kind, ids, send)


def _post_turns(client: httpx.Client, batch: list[dict[str, str]]) -> Callable[[], int]:
    return lambda: _http_status(client.post("/v1/turns", json={"turns": batch}))


def _enqueue(batch: list[dict[str, str]], broker_url: str) -> Callable[[], int]:
    def send() -> int:
        enqueue_turns(batch, tenant=TENANT, broker_url=broker_url)
        return 200

    return send


def _chat(traffic: Traffic, client: httpx.Client, user: str, tag: str, i: int) -> None:
    body = {
        "user_id": user,
        "session_id": f"{user}-chat",
        "message": f"{user} chat {tag}: I keep item {i * 11 % 113} in box {i % 13}.",
    }
    started = time.monotonic()
    try:
        response = client.post("/v1/chat", json=body)
    except httpx.HTTPError:
        traffic.record(Answer(started, time.monotonic(), "chat", 0), [])
        return
    ids = response.json().get("turn_ids", [])[:1] if response.status_code in OK else []
    retry_after = response.status_code != 503 or "retry-after" in response.headers
    traffic.record(
        Answer(started, time.monotonic(), "chat", response.status_code, retry_after), ids
    )
    if response.status_code not in OK:
        time.sleep(0.2)


@contextmanager
def beat_process(env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """`memwell beat`, sweeping every few seconds."""
    data = tempfile.mkdtemp(prefix="chaos-beat-")
    beat_env = {**env, "MEMWELL_DATA_DIR": data, "MEMWELL_SWEEP_EVERY_S": "3"}
    with open(os.path.join(data, "beat.log"), "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "memwell", "beat"],
            env=beat_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def started_together(
    env: dict[str, str], n_workers: int, db_url: str, url: str
) -> Iterator[ApiProcess]:
    """The workers and the API, started at once (each waits for its model and its
    broker; one after the other, the waits add up); stopped on the way out."""
    procs = [
        WorkerProcess(env, concurrency=2, name=f"chaos-sentinel-{i}") for i in range(n_workers)
    ]
    with ThreadPoolExecutor(max_workers=n_workers + 1) as pool:
        api_future = pool.submit(ApiProcess, db_url, url)
        waits = [pool.submit(p.start, timeout=180) for p in procs]
    try:
        for wait in waits:
            wait.result()
        api = api_future.result()
    except BaseException:
        for p in procs:
            p.stop()
        raise
    try:
        yield api
    finally:
        api.stop()
        for p in procs:
            p.stop()


@dataclass
class Failover:
    killed_at: float = 0.0
    promoted_s: float = 0.0
    rejoined_s: float = 0.0


def _fail_over(cluster: SentinelCluster, traffic: Traffic, *, kill_after: int) -> Failover:
    """SIGKILL the primary once `kill_after` turns are acknowledged; start it again
    as a replica once the sentinels have promoted the other server."""
    wait_for(lambda: traffic.n_acked >= kill_after, timeout=600, interval=0.05, what="traffic")
    before = cluster.primary_port()
    killed = cluster.kill_primary()
    report = Failover(killed_at=time.monotonic())
    wait_for(
        lambda: cluster.primary_port() not in (None, before),
        timeout=60,
        interval=0.1,
        what="the sentinels to promote the replica",
    )
    report.promoted_s = time.monotonic() - report.killed_at
    cluster.rejoin(killed)
    report.rejoined_s = time.monotonic() - report.killed_at
    return report


def run_sentinel_failover(
    services: Services,
    *,
    turns: int = 2000,
    threads: int = 3,
    kill_share: float = 0.3,
    n_workers: int = 2,
    drain_timeout_s: float = 600,
) -> Result:
    db_url = services.fresh_database("chaos_sentinel_failover")
    cluster = SentinelCluster(services.root / f"sentinel-{time.monotonic_ns()}")
    url = cluster.start()
    engine = make_engine(db_url, pool_size=2)
    sessions = make_sessionmaker(engine)
    env = worker_env(db_url, url)
    traffic = Traffic(target=turns)
    started = time.monotonic()
    try:
        with started_together(env, n_workers, db_url, url) as api, beat_process(env):
            try:
                pool = [
                    threading.Thread(target=_producer, args=(traffic, api.url, url, n), daemon=True)
                    for n in range(threads)
                ]
                for thread in pool:
                    thread.start()
                failover = _fail_over(cluster, traffic, kill_after=int(turns * kill_share))
                processed_at_kill = _processed(sessions)
                traffic.stop.wait(drain_timeout_s)
                traffic.stop.set()
                for thread in pool:
                    thread.join(timeout=60)
            finally:
                traffic.stop.set()
            acked = sorted(set(traffic.acked))
            _wait_accepted(sessions, acked, timeout=drain_timeout_s)
            consumed_after = _processed(sessions) - processed_at_kill
            counts = measure(sessions, acked, set(acked))
            letters = dead_letters(sessions)
    finally:
        engine.dispose()
        cluster.stop()
    tally = tally_answers(traffic.answers, failover.killed_at)
    return Result.of(
        FAULT,
        sent=len(acked),
        counts=counts,
        drain_s=time.monotonic() - started,
        dead_letters=letters,
        errors_during=tally["during_bad"],
        errors_after=tally["after_bad"],
        refused=int(str(tally["refused"])),
        resumed_s=float(str(tally["resumed_s"])),
        settled_s=float(str(tally["settled_s"])),
        notes=(
            f"{len(traffic.answers)} calls ({tally['by_kind']}); primary SIGKILLed, "
            f"promoted in {failover.promoted_s:.1f} s, old primary back as replica at "
            f"{failover.rejoined_s:.1f} s; {tally['refused']}x503, "
            f"writes resumed in {tally['resumed_s']:.1f} s, the last 503 at "
            f"{tally['settled_s']:.1f} s; turns processed after the kill: {consumed_after}"
            + (f"; errors: {tally['bad_by']}" if tally["bad_by"] else "")
        ),
    )


def tally_answers(answers: list[Answer], killed_at: float) -> dict[str, object]:
    """The answers around the kill. Writes resume with the first broker write sent after
    the kill and acknowledged (one sent before the kill and acknowledged just after it
    says nothing about the new primary). The switch lasts from the kill to the last
    refusal: each client finds the new primary on its own (every connection of the
    API's pool, every producer's), so one may still be refused after another's first
    write went through. During the switch anything but a 2xx or a 503 with Retry-After
    is an error; after it, anything but a 2xx is."""
    broker_ok = [
        a.ended for a in answers if a.kind != "turns" and a.status in OK and a.started > killed_at
    ]
    resumed = min(broker_ok, default=float("inf"))
    refusals = [a.ended for a in answers if a.status == 503 and a.ended >= killed_at]
    settled = max([resumed, *refusals])
    during = [a for a in answers if a.ended >= killed_at and a.started <= settled]
    after = [a for a in answers if a.started > settled]
    bad = [a for a in during if a.status not in OK and not (a.status == 503 and a.retry_after)]
    bad += [a for a in after if a.status not in OK]
    kinds = sorted({a.kind for a in answers})
    return {
        "refused": sum(a.status == 503 for a in answers),
        "during_bad": sum(a.started <= settled for a in bad),
        "after_bad": sum(a.started > settled for a in bad),
        "bad_by": ", ".join(
            f"{kind} {status}{'' if retry else ' without Retry-After'} x{n}"
            for (kind, status, retry), n in sorted(
                Counter((a.kind, a.status, a.retry_after) for a in bad).items()
            )
        ),
        "resumed_s": resumed - killed_at,
        "settled_s": settled - killed_at,
        "by_kind": ", ".join(f"{k} {sum(a.kind == k for a in answers)}" for k in kinds),
    }
