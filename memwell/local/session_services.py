"""Throwaway real services for a test or benchmark session: embedded Postgres+pgvector
and Redis.

TEST_DATABASE_URL / TEST_REDIS_URL in the environment win; otherwise embedded
servers start once per test session in a temporary directory, removed when they
stop. The reaper
(memwell/local/reaper.py) stops them if the session is killed before it can.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

from memwell.db.driver import libpq_url
from memwell.local.embedded import EmbeddedPostgres, EmbeddedRedis
from memwell.local.reaper import reaper


@dataclass(frozen=True)
class PostgresService:
    url: str
    pid: int | None = None  # the postmaster, when this session started it

    def create_database(self, name: str) -> str:
        """A fresh, empty database on the same server; returns its URL."""
        admin = make_url(self.url).set(database="postgres")
        with psycopg.connect(
            libpq_url(admin.render_as_string(hide_password=False)), autocommit=True
        ) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return make_url(self.url).set(database=name).render_as_string(hide_password=False)


@contextmanager
def postgres(parent: Path | None = None) -> Iterator[PostgresService]:
    """`parent`: where its directory goes (default: the temporary directory)."""
    if url := os.environ.get("TEST_DATABASE_URL"):
        yield PostgresService(url)
        return
    root = Path(tempfile.mkdtemp(prefix="memwell-test-pg-", dir=parent))
    pg = EmbeddedPostgres(pgdata=root / "pgdata", database="memwell_test")
    pid = None
    try:
        url = pg.start()
        if (pid := pg.pid) is not None:
            reaper().watch(pid, signum=signal.SIGINT)  # SIGINT: Postgres' fast shutdown
        yield PostgresService(url, pid)
    finally:
        pg.stop()
        if pid is not None:
            reaper().forget(pid)
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def redis_url(parent: Path | None = None) -> Iterator[str]:
    """`parent`: where its directory goes (default: the temporary directory)."""
    if url := os.environ.get("TEST_REDIS_URL"):
        yield url
        return
    root = Path(tempfile.mkdtemp(prefix="memwell-test-redis-", dir=parent))
    server = EmbeddedRedis(data_dir=root, appendonly=False)
    pid = None
    try:
        url = server.start()
        if (pid := server.pid) is not None:
            reaper().watch(pid)
        yield url
    finally:
        server.stop()
        if pid is not None:
            reaper().forget(pid)
        shutil.rmtree(root, ignore_errors=True)
