"""Throwaway real services for benchmarks: embedded Postgres (+ Valkey, + a worker).

Each run gets a fresh temporary directory, so a benchmark never touches a developer's
`.memwell/` data, and everything it started is stopped on exit (Ctrl-C included: the
children run in their own sessions, so only these context managers stop them).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import kombu.exceptions
import redis.exceptions

from bench.harness.evaldata import data_root
from memwell.core.queues import ALL_QUEUES, NON_LLM_QUEUES, Queue
from memwell.db import migrate
from memwell.intake.dispatch import forget_producer, producer_app
from memwell.local.embedded import EmbeddedPostgres, EmbeddedRedis

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCOMO_DEFAULT = data_root() / "locomo" / "locomo-dev.json"


@dataclass(frozen=True)
class BenchStack:
    database_url: str
    redis_url: str | None
    root: Path
    worker_pid: int | None = None
    #: the embedded servers' main processes (for figures that measure their CPU)
    postgres_pid: int | None = None
    redis_pid: int | None = None


@contextmanager
def bare_postgres(
    *, keep: bool = False, shared_buffers_mb: int | None = None, database: str = "memwell_bench"
) -> Iterator[BenchStack]:
    """An embedded Postgres in a temp dir with an empty database (no Memwell schema): for
    a peer's store, started as Memwell's is. `shared_buffers_mb` None: the embedded
    default (a quarter of memory, see memwell.local.embedded)."""
    root = Path(tempfile.mkdtemp(prefix="memwell-bench-"))
    pg = EmbeddedPostgres(
        pgdata=root / "pgdata", database=database, shared_buffers_mb=shared_buffers_mb
    )
    try:
        url = pg.start()
        yield BenchStack(database_url=url, redis_url=None, root=root, postgres_pid=pg.pid)
    finally:
        pg.stop()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


@contextmanager
def postgres_only(
    *, keep: bool = False, shared_buffers_mb: int | None = None
) -> Iterator[BenchStack]:
    """A migrated embedded Postgres in a temp dir."""
    with bare_postgres(keep=keep, shared_buffers_mb=shared_buffers_mb) as stack:
        migrate.upgrade(stack.database_url)
        yield stack


@contextmanager
def services(*, shared_buffers_mb: int | None = None) -> Iterator[BenchStack]:
    """Postgres + Valkey, no worker: enough for the API (it only enqueues)."""
    with postgres_only(shared_buffers_mb=shared_buffers_mb) as pg:
        server = EmbeddedRedis(data_dir=pg.root / "redis", appendonly=False)
        url = server.start()
        try:
            yield replace(pg, redis_url=url, redis_pid=server.pid)
        finally:
            forget_producer(url)  # a later stack may get this port
            server.stop()


def service_env(stack: BenchStack) -> dict[str, str]:
    """The environment of a child process (API, worker) on this stack, in local mode."""
    assert stack.redis_url is not None
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "MEMWELL_DATA_DIR": str(stack.root / "data"),
        "MEMWELL_EMBEDDING_PROVIDER": "local",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    # Either one would switch the chat model and the pipeline to LLM mode.
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    return env


def stop_group(proc: subprocess.Popen[bytes], *, timeout: float = 30) -> None:
    """SIGTERM the child's process group, then SIGKILL if it lingers."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


@contextmanager
def worker_process(
    stack: BenchStack,
    *,
    concurrency: int = 2,
    extra_env: Mapping[str, str] | None = None,
    queues: str = ALL_QUEUES,
    name: str = "bench",
) -> Iterator[int]:
    """One real Celery worker subprocess on `queues`; yields its main pid.
    `extra_env` adds to the local-mode environment (an endpoint, a pipeline mode)."""
    assert stack.redis_url is not None
    log = (stack.root / f"{name}-worker.log").open("ab")
    hostname = f"{name}-{os.getpid()}@localhost"
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker",
         "-Q", queues, "-c", str(concurrency), "-n", hostname,
         "--loglevel", "WARNING", "--without-gossip", "--without-mingle"],
        env={**service_env(stack), **(extra_env or {})}, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True, cwd=REPO_ROOT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not _pings(stack.redis_url, hostname):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start; see {log.name}")
        yield worker.pid
    finally:
        stop_group(worker)
        log.close()


def _pings(redis_url: str, hostname: str) -> bool:
    """Whether the worker answers a ping. A connection a previous stack on the same port
    left in a pool fails once; it is dropped and the next ping uses a new one."""
    try:
        return bool(producer_app(redis_url).control.ping(destination=[hostname], timeout=0.5))
    except (redis.exceptions.ConnectionError, kombu.exceptions.OperationalError):
        forget_producer(redis_url)
        return False


@contextmanager
def full_stack(
    *,
    concurrency: int = 2,
    extra_env: Mapping[str, str] | None = None,
    llm_worker: bool = False,
) -> Iterator[BenchStack]:
    """Postgres + Valkey + one real Celery worker subprocess (local mode, unless
    `extra_env` names an endpoint or a pipeline mode). `llm_worker`: as `memwell up`
    runs LLM mode, the llm queue gets a second worker of one process of its own."""
    with services() as stack, ExitStack() as workers:
        env = service_env(stack)
        # In-process code of the benchmark (settings, enqueue) finds the same stack.
        os.environ.update({k: env[k] for k in ("DATABASE_URL", "REDIS_URL", "MEMWELL_DATA_DIR")})
        os.environ["MEMWELL_EMBEDDING_PROVIDER"] = "local"
        queues = NON_LLM_QUEUES if llm_worker else ALL_QUEUES
        pid = workers.enter_context(
            worker_process(stack, concurrency=concurrency, extra_env=extra_env, queues=queues)
        )
        if llm_worker:
            workers.enter_context(
                worker_process(
                    stack,
                    concurrency=1,
                    extra_env=extra_env,
                    queues=Queue.LLM.value,
                    name="bench-llm",
                )  # fmt: skip
            )
        yield replace(stack, worker_pid=pid)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]
