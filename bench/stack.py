"""Throwaway real services for benchmarks: embedded Postgres (+ Valkey, + a worker).

Each run gets a fresh temporary directory, so a benchmark never touches a developer's
`.memwell/` data, and everything it started is stopped on exit.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from memwell import migrate
from memwell.embedded import EmbeddedPostgres, EmbeddedRedis
from memwell.enqueue import producer_app

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCOMO_DEFAULT = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"


@dataclass(frozen=True)
class BenchStack:
    database_url: str
    redis_url: str | None
    root: Path


@contextmanager
def postgres_only(*, keep: bool = False) -> Iterator[BenchStack]:
    """A migrated embedded Postgres in a temp dir."""
    root = Path(tempfile.mkdtemp(prefix="memwell-bench-"))
    pg = EmbeddedPostgres(pgdata=root / "pgdata", database="memwell_bench")
    try:
        url = pg.start()
        migrate.upgrade(url)
        yield BenchStack(database_url=url, redis_url=None, root=root)
    finally:
        pg.stop()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


@contextmanager
def full_stack(*, concurrency: int = 2) -> Iterator[BenchStack]:
    """Postgres + Valkey + one real Celery worker subprocess (local mode)."""
    with postgres_only() as pg:
        server = EmbeddedRedis(data_dir=pg.root / "redis", appendonly=False)
        redis_url = server.start()
        env = {
            **os.environ,
            "DATABASE_URL": pg.database_url,
            "REDIS_URL": redis_url,
            "MEMWELL_DATA_DIR": str(pg.root / "data"),
            "MEMWELL_EMBEDDING_PROVIDER": "local",
            "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        env.pop("OPENAI_API_KEY", None)
        env.pop("OPENAI_BASE_URL", None)
        os.environ.update({k: env[k] for k in ("DATABASE_URL", "REDIS_URL", "MEMWELL_DATA_DIR")})
        os.environ["MEMWELL_EMBEDDING_PROVIDER"] = "local"
        log = (pg.root / "worker.log").open("ab")
        hostname = f"bench-{os.getpid()}@localhost"
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker",
             "-Q", "ingest,embed,llm,maintenance", "-c", str(concurrency), "-n", hostname,
             "--loglevel", "WARNING", "--without-gossip", "--without-mingle"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            cwd=REPO_ROOT,
        )  # fmt: skip
        try:
            app = producer_app(redis_url)
            deadline = time.monotonic() + 120
            while not app.control.ping(destination=[hostname], timeout=0.5):
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"worker did not start; see {pg.root / 'worker.log'}")
            yield BenchStack(database_url=pg.database_url, redis_url=redis_url, root=pg.root)
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
            log.close()
            server.stop()


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]
