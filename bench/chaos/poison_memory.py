"""What one huge poison item costs a worker: its memory, and the dead letter it leaves.

A raw producer can push anything onto a queue's list. The worker's transport pops it,
finds it is not a message and keeps it as a dead letter (worker/poison_items.py). This
pushes items of growing size (not JSON, as a bad producer would send them) onto the
ingest queue of a real worker, one at a time, and for each reads:

- the worker's main process (the one that consumes): its resident memory before the
  item, and its peak (VmHWM, reset before each item) while it took and kept it;
- the dead letter's payload as Postgres holds it (octet_length of its JSON text);
- the seconds from the push to the letter.

Baseline, in the same run: a 1 KB item, and the item's own size (receiving it costs
that much at least: Redis hands it over whole, and redis-py's reply parser buffers it).

    python -m bench.chaos.poison_memory                 # 1, 10 and 100 MB
    python -m bench.chaos.poison_memory --sizes-mb 100,200
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import redis
from sqlalchemy import func, select, text

from bench.harness.host import describe_host
from bench.harness.procmem import proc_mem
from bench.harness.stack import services, worker_process
from memwell.core.queues import Queue
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.db.models import DeadLetter

MB = 1024 * 1024
#: Popped this long ago with no letter: the item was lost.
LOST_AFTER_S = 60.0


@dataclass(frozen=True)
class Row:
    size_mb: float
    hwm_before_mb: float
    hwm_after_mb: float
    letter_bytes: int | None
    seconds: float

    @property
    def rise_mb(self) -> float:
        return self.hwm_after_mb - self.hwm_before_mb


def _item(size: int) -> bytes:
    """`size` bytes that are not JSON (a brace, then padding)."""
    tag = uuid.uuid4().hex.encode()
    return b"{" + tag + b"x" * max(0, size - len(tag) - 1)


def _one(redis_url: str, database_url: str, worker_pid: int, size: int, timeout: float) -> Row:
    engine = make_engine(database_url, pool_size=1)
    sessions = make_sessionmaker(engine)
    client = redis.Redis.from_url(redis_url)
    with sessions() as session:
        newest = session.scalar(select(func.max(DeadLetter.id))) or 0
    raw = _item(size)
    _reset_peak(worker_pid)
    before = proc_mem(worker_pid).rss_mb
    started = time.monotonic()
    try:
        client.lpush(Queue.INGEST.value, raw)
        del raw
        stored: int | None = None
        drained_at: float | None = None
        while time.monotonic() - started < timeout:
            with sessions() as session:
                stored = session.scalar(
                    select(func.octet_length(text("dead_letters.payload::text"))).where(
                        DeadLetter.id > newest
                    )
                )
            if stored is not None:
                break
            if drained_at is None and client.llen(Queue.INGEST.value) == 0:
                drained_at = time.monotonic()
            if drained_at is not None and time.monotonic() - drained_at > LOST_AFTER_S:
                break  # popped long ago, and no letter: lost
            time.sleep(0.2)
        seconds = time.monotonic() - started
    finally:
        client.close()
        engine.dispose()
    return Row(size / MB, before, proc_mem(worker_pid).hwm_mb, stored, seconds)


def _reset_peak(pid: int) -> None:
    """Set the process's VmHWM back to its VmRSS (Linux: 5 to clear_refs), so each item's
    peak is its own, not an earlier, larger item's."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError as exc:
        raise SystemExit(f"cannot reset the worker's peak memory ({exc})") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-mb", default="1,10,100", help="item sizes, comma-separated")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per item")
    args = parser.parse_args(argv)
    sizes = [int(float(s) * MB) for s in args.sizes_mb.split(",")]
    print(f"host: {describe_host()}")
    with services() as stack, worker_process(stack, concurrency=1, name="poison") as pid:
        assert stack.redis_url is not None
        rows = [_one(stack.redis_url, stack.database_url, pid, 1024, args.timeout)]
        for size in sizes:
            print(f"  {size / MB:.0f} MB item ...", file=sys.stderr, flush=True)
            rows.append(_one(stack.redis_url, stack.database_url, pid, size, args.timeout))
    print()
    print("| item | worker RSS before | peak | rise | rise / item | letter in Postgres | s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        letter = "lost" if r.letter_bytes is None else f"{r.letter_bytes / 1024:,.0f} KiB"
        per_item = r.rise_mb / r.size_mb if r.size_mb >= 1 else 0.0
        print(
            f"| {r.size_mb:,.3f} MB | {r.hwm_before_mb:,.0f} MB | {r.hwm_after_mb:,.0f} MB | "
            f"{r.rise_mb:,.0f} MB | {per_item:.2f} | {letter} | {r.seconds:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
