"""Enqueue cost: µs per turn for memwell.enqueue_turn (single) and enqueue_turns
(batched), next to plain Celery send_task and a raw redis-py LPUSH of the same
payload, all against the same real Redis in one run.

    python -m bench.figures.enqueue [--n 2000] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis
from celery import Celery

from bench.harness.common import print_table
from bench.harness.headline import ReportRow, add_json_flag, write_json
from memwell.core.queues import Queue, TaskName
from memwell.intake.enqueue import enqueue_turn, enqueue_turns

BATCH = 100


@contextmanager
def _redis(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    import tempfile
    from pathlib import Path

    from memwell.local.embedded import EmbeddedRedis

    server = EmbeddedRedis(data_dir=Path(tempfile.mkdtemp(prefix="bench-redis-")), appendonly=False)
    try:
        yield server.start()
    finally:
        server.stop()


def _turn(i: int) -> dict[str, object]:
    return {"user_id": f"u{i % 20}", "session_id": "s1", "content": f"I like tea number {i}."}


def _time_per_turn(label: str, n_turns: int, run: Callable[[], object]) -> tuple[str, float]:
    started = time.perf_counter()
    run()
    elapsed = time.perf_counter() - started
    print(f"  measured {label}", flush=True)
    return label, elapsed / n_turns * 1e6


LPUSH = "raw redis-py LPUSH (floor)"
CELERY = "plain Celery send_task"
SINGLE = "memwell.enqueue_turn (single)"
BATCHED = f"memwell.enqueue_turns (batch {BATCH})"


@dataclass(frozen=True)
class EnqueueHeadline:
    """Figure 3: µs per turn, memwell's two paths and the two baselines."""

    single_us: float
    batched_us: float
    celery_us: float
    lpush_us: float

    def report_row(self) -> ReportRow:
        return ReportRow(
            figure="3. enqueue cost per turn",
            measured=f"single {self.single_us:.0f} µs; batched {self.batched_us:.0f} µs",
            baseline=f"Celery send_task {self.celery_us:.0f} µs; raw LPUSH {self.lpush_us:.0f} µs",
            goal="<= 300 µs single, <= 30 µs batched",
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000, help="turns per measurement")
    parser.add_argument("--redis-url", default=None, help="default: an embedded Valkey")
    add_json_flag(parser)
    return parser


def headline(argv: list[str] | None = None) -> EnqueueHeadline:
    """Run figure 3, print its table, return its headline numbers."""
    args = _parser().parse_args(argv)
    n = args.n

    with _redis(args.redis_url) as url:
        client = redis.Redis.from_url(url)
        plain = Celery("plain", broker=url, set_as_current=False)
        payload = {"v": 1, "tenant": "bench", "turns": [_turn(0)]}
        body = json.dumps(payload)
        # Warm every path once: connection setup is not per-turn cost.
        enqueue_turn(**_turn(0), tenant="bench", broker_url=url)  # type: ignore[arg-type]
        plain.send_task(TaskName.INGEST_TURNS, kwargs={"payload": payload}, queue=Queue.INGEST)
        client.lpush("bench-raw", body)

        rows = [
            _time_per_turn(
                LPUSH,
                n,
                lambda: [client.lpush("bench-raw", body) for _ in range(n)],
            ),
            _time_per_turn(
                CELERY,
                n,
                lambda: [
                    plain.send_task(
                        TaskName.INGEST_TURNS, kwargs={"payload": payload}, queue=Queue.INGEST
                    )
                    for _ in range(n)
                ],
            ),
            _time_per_turn(
                SINGLE,
                n,
                lambda: [
                    enqueue_turn(**_turn(i), tenant="bench", broker_url=url)  # type: ignore[arg-type]
                    for i in range(n)
                ],
            ),
            _time_per_turn(
                BATCHED,
                n,
                lambda: enqueue_turns(
                    [_turn(i) for i in range(n)], tenant="bench", broker_url=url, chunk_size=BATCH
                ),
            ),
        ]
        client.delete("bench-raw", Queue.INGEST.value)
        goals = {SINGLE: "<= 300", BATCHED: "<= 30"}
        print(f"\nEnqueue cost, {n} turns each, run {uuid.uuid4().hex[:6]}")
        print_table(
            ["path", "µs/turn", "goal µs"],
            [(label, us, goals.get(label, "")) for label, us in rows],
        )
    us = dict(rows)
    return EnqueueHeadline(
        single_us=us[SINGLE], batched_us=us[BATCHED], celery_us=us[CELERY], lpush_us=us[LPUSH]
    )


def main() -> None:
    write_json(headline(), _parser().parse_args().json)


if __name__ == "__main__":
    main()
