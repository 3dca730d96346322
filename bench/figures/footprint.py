"""Figure 6, memory footprint: peak RSS of the API and of a worker, idle and under load,
and Redis memory per 1,000 active sessions.

    python -m bench.figures.footprint [--rows 100000] [--chat-requests 300] [--turns 3000]
                                    [--sessions 1000] [--exchanges 10]

Real subprocesses: the API (`python -m memwell api`, one uvicorn process) and a
Celery worker (prefork, `--concurrency` pool processes, every process listed). Memory
comes from /proc: VmRSS now, VmHWM the peak, Pss the fair share of pages shared by the
forked pool. Load: `--chat-requests` chats for the API; `--turns` enqueued turns (plus
the chats' turns) consolidated by the worker. Redis: a fresh Valkey, INFO used_memory
before and after `--sessions` sessions get `--exchanges` exchanges each through the
real buffer code. Baselines in the same run: an empty interpreter, an empty Valkey.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import memwell
from bench.figures.pipeline import pipeline_turns
from bench.figures.retrieval import TENANT
from bench.harness.chat_stack import chat_bodies, chat_stack
from bench.harness.drain import wait_processed
from bench.harness.headline import ReportRow, add_json_flag, write_json
from bench.harness.loadgen import run_load
from bench.harness.procmem import ProcMem, empty_interpreter_hwm_mb, tree_mem
from bench.harness.redis_sessions import SessionFill, fill_sessions
from bench.harness.stack import worker_process
from memwell.db.engine import make_engine, make_sessionmaker


@dataclass(frozen=True)
class FootprintHeadline:
    """Figure 6, in MB."""

    python_mb: float
    api_idle_mb: float
    api_peak_mb: float
    worker_processes: int
    worker_idle_pss_mb: float
    worker_peak_pss_mb: float
    worker_peak_hwm_mb: float
    redis_empty_mb: float
    redis_per_1000_sessions_mb: float
    turns_per_session: int

    def report_row(self) -> ReportRow:
        return ReportRow(
            figure="6. memory footprint",
            measured=f"API {self.api_idle_mb:.0f} MB idle, peak {self.api_peak_mb:.0f} MB; "
            f"worker ({self.worker_processes} processes, Pss) {self.worker_idle_pss_mb:.0f} MB "
            f"idle, {self.worker_peak_pss_mb:.0f} MB loaded; Redis "
            f"{self.redis_per_1000_sessions_mb:.1f} MB per 1,000 sessions "
            f"of {self.turns_per_session} turns",
            baseline=f"empty interpreter {self.python_mb:.0f} MB; "
            f"empty Redis {self.redis_empty_mb:.1f} MB",
            goal="none set",
        )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--chat-requests", type=int, default=300)
    p.add_argument("--turns", type=int, default=3000, help="enqueued for the worker")
    p.add_argument("--concurrency", type=int, default=2, help="worker pool processes")
    p.add_argument("--sessions", type=int, default=1000)
    p.add_argument("--exchanges", type=int, default=10, help="user+assistant pairs per session")
    p.add_argument("--drain-timeout", type=float, default=600.0)
    add_json_flag(p)
    return p


def _print_procs(title: str, procs: list[ProcMem]) -> None:
    print(f"  {title}")
    total = ProcMem(
        pid=0,
        name="sum",
        rss_mb=sum(m.rss_mb for m in procs),
        hwm_mb=sum(m.hwm_mb for m in procs),
        pss_mb=sum(m.pss_mb for m in procs),
    )
    for m in [*procs, total] if len(procs) > 1 else procs:
        print(f"    {m.name:<14} VmRSS {m.rss_mb:7.1f}  VmHWM {m.hwm_mb:7.1f}  Pss {m.pss_mb:7.1f}")


def headline(argv: list[str] | None = None) -> FootprintHeadline:
    """Run figure 6, print its table, return its headline numbers."""
    a = _parser().parse_args(argv)
    python_mb = empty_interpreter_hwm_mb()
    with chat_stack(rows=a.rows, users=a.users) as chat:
        with worker_process(chat.stack, concurrency=a.concurrency) as worker_pid:
            api_idle, worker_idle = tree_mem(chat.api.pid), tree_mem(worker_pid)
            bodies = chat_bodies(a.chat_requests, users=a.users)
            run_load(chat.api.url, "/v1/chat", clients=10, count=len(bodies), time_cap_s=300,
                     bodies=bodies, headers=chat.headers)  # fmt: skip
            api_loaded = tree_mem(chat.api.pid)
            assert chat.stack.redis_url is not None
            print(f"  enqueueing {a.turns} turns for the worker", file=sys.stderr)
            memwell.enqueue_turns(pipeline_turns(a.turns), tenant=TENANT,
                                  broker_url=chat.stack.redis_url, chunk_size=100)  # fmt: skip
            engine = make_engine(chat.stack.database_url, pool_size=1)
            expected = a.turns + 2 * len(bodies)
            done = wait_processed(make_sessionmaker(engine), expected, timeout_s=a.drain_timeout)
            engine.dispose()
            worker_loaded = tree_mem(worker_pid)
        fill = fill_sessions(chat.stack.root, sessions=a.sessions, exchanges=a.exchanges)
    print("\nmemory footprint (MB; VmHWM is the peak since the process started)")
    print(f"  empty python interpreter: VmHWM {python_mb:.1f}")
    _print_procs("API, idle after startup", api_idle)
    _print_procs(f"API, after {len(bodies)} chat requests", api_loaded)
    _print_procs(f"worker (-c {a.concurrency}), idle", worker_idle)
    _print_procs(f"worker, after {done}/{expected} turns consolidated", worker_loaded)
    _print_fill(fill)
    return FootprintHeadline(
        python_mb=python_mb,
        api_idle_mb=api_idle[0].rss_mb,
        api_peak_mb=api_loaded[0].hwm_mb,
        worker_processes=len(worker_loaded),
        worker_idle_pss_mb=sum(m.pss_mb for m in worker_idle),
        worker_peak_pss_mb=sum(m.pss_mb for m in worker_loaded),
        worker_peak_hwm_mb=sum(m.hwm_mb for m in worker_loaded),
        redis_empty_mb=fill.empty_mb,
        redis_per_1000_sessions_mb=fill.per_1000_mb,
        turns_per_session=fill.turns_per_session,
    )


def _print_fill(fill: SessionFill) -> None:
    print(f"  Redis: empty used_memory {fill.empty_mb:.2f}; after {fill.sessions:,} sessions of "
          f"{fill.turns_per_session} turns ({fill.mean_tokens:.0f} tokens buffered each): "
          f"{fill.full_mb:.2f}; per 1,000 sessions {fill.per_1000_mb:.2f}")  # fmt: skip


def main() -> int:
    write_json(headline(), _parser().parse_args().json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
