"""Search on a streaming replica: two embedded Postgres servers, the second a hot
standby of the first (pg_basebackup, standby.signal), behind the real API with
MEMWELL_DATABASE_READ_URL pointing at the standby.

- searches run on the standby: its scan counters for `memories` grow by every
  search, the primary's do not;
- read-your-writes: with the standby's replay paused, a memory added through the API
  is found by the same user's next search and listing (their reads go to the primary
  for MEMWELL_READ_YOUR_WRITES_S); once that window ends, the paused standby is what
  answers, and does not have it;
- the lag gauge reports the standby;
- the standby stopped mid-run: every search still answers 200, from the primary;
  started again, it serves reads again.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from memwell.core.settings import Settings
from memwell.db import migrate
from memwell.db.driver import libpq_url
from memwell.db.recent_writes import KEY_PREFIX
from memwell.local.embedded import EmbeddedPostgres
from memwell.local.postgres_standby import start_standby
from memwell.local.waiting import wait_for

WINDOW_S = 2.0
SEARCHES = 20


class Pair:
    def __init__(self, root: Path) -> None:
        self.primary = EmbeddedPostgres(pgdata=root / "primary", database="replica_test")
        self.primary_url = self.primary.start()
        migrate.upgrade(self.primary_url)
        self.standby, self.standby_url = start_standby(self.primary_url, root / "standby")

    def stop(self) -> None:
        self.standby.stop()
        self.primary.stop()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    servers = Pair(tmp_path_factory.mktemp("replica"))
    yield servers
    servers.stop()


@pytest.fixture(scope="module")
def client(pair: Pair, redis_url: str) -> Iterator[TestClient]:
    from api.main import create_app

    settings = Settings(
        DATABASE_URL=pair.primary_url,
        REDIS_URL=redis_url,
        MEMWELL_DATABASE_READ_URL=pair.standby_url,
        MEMWELL_READ_YOUR_WRITES_S=WINDOW_S,
        MEMWELL_AUTH_DISABLED=True,
        MEMWELL_EMBEDDING_PROVIDER="local",
        MEMWELL_RATE_LIMIT_PER_S=0,
    )
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def _scans(url: str) -> int:
    """Scans of `memories` this server has run (a standby counts its own reads)."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables"
            " WHERE relname = 'memories'"
        ).fetchone()
    return int(row[0]) if row else 0


def _replayed(pair: Pair) -> bool:
    with psycopg.connect(libpq_url(pair.primary_url), autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    with psycopg.connect(libpq_url(pair.standby_url), autocommit=True) as conn:
        done = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (row[0],)).fetchone()
    return bool(done and done[0])


def _add(client: TestClient, user: str, content: str) -> None:
    response = client.post(
        "/v1/memories", json={"user_id": user, "memories": [{"content": content}]}
    )
    assert response.status_code == 200, response.text


def _search(client: TestClient, user: str, query: str) -> list[str]:
    response = client.post("/v1/memories/search", json={"user_id": user, "query": query})
    assert response.status_code == 200, response.text
    return [hit["content"] for hit in response.json()["hits"]]


def _listed(client: TestClient, user: str) -> list[str]:
    response = client.get("/v1/memories", params={"user_id": user})
    assert response.status_code == 200, response.text
    return [m["content"] for m in response.json()["memories"]]


def _window_over(redis_url: str, user: str) -> bool:
    client = redis.Redis.from_url(redis_url)
    try:
        return not client.keys(f"{KEY_PREFIX}*{user}")
    finally:
        client.close()


def test_searches_run_on_the_standby(client: TestClient, pair: Pair, redis_url: str) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    _add(client, user, "The user keeps the spare key under the blue flowerpot.")
    wait_for(lambda: _replayed(pair), timeout=30, what="the standby to replay the add")
    wait_for(lambda: _window_over(redis_url, user), timeout=30, what="the write window")
    before_standby, before_primary = _scans(pair.standby_url), _scans(pair.primary_url)
    for _ in range(SEARCHES):
        assert any("flowerpot" in c for c in _search(client, user, "where is the spare key"))
    # Statistics reach the shared counters when a backend idles, within seconds.
    wait_for(
        lambda: _scans(pair.standby_url) - before_standby >= SEARCHES,
        timeout=30,
        what="the standby to count the searches",
    )
    assert _scans(pair.primary_url) - before_primary < SEARCHES
    wait_for(_lag_reported, timeout=30, what="the lag gauge")


def _lag_reported() -> bool:
    lag = REGISTRY.get_sample_value("memwell_replica_lag_seconds", {"replica": "0"})
    return lag is not None and lag >= 0


def test_a_user_reads_their_own_write_while_the_standby_lags(
    client: TestClient, pair: Pair, redis_url: str
) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(libpq_url(pair.standby_url), autocommit=True) as standby:
        standby.execute("SELECT pg_wal_replay_pause()")
        try:
            _add(client, user, "The user's locker code is 4417.")
            # At once, with the standby frozen: the primary answers this user.
            assert any("4417" in c for c in _search(client, user, "what is the locker code"))
            assert any("4417" in c for c in _listed(client, user))
            wait_for(lambda: _window_over(redis_url, user), timeout=30, what="the window")
            # The window is over: the standby answers, and it has not replayed the add.
            assert not any("4417" in c for c in _search(client, user, "what is the locker code"))
            assert not any("4417" in c for c in _listed(client, user))
        finally:
            standby.execute("SELECT pg_wal_replay_resume()")
    wait_for(lambda: _replayed(pair), timeout=30, what="the standby to catch up")
    assert any("4417" in c for c in _search(client, user, "what is the locker code"))


def test_reads_fall_back_to_the_primary_when_the_standby_stops(
    client: TestClient, pair: Pair, redis_url: str
) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    _add(client, user, "The user parks on level three of the garage.")
    wait_for(lambda: _replayed(pair), timeout=30, what="the standby to replay the add")
    # Inside the write window this user's reads go to the primary and never try the standby.
    wait_for(lambda: _window_over(redis_url, user), timeout=30, what="the write window")
    fallbacks = REGISTRY.get_sample_value("memwell_replica_fallbacks_total", {"replica": "0"}) or 0
    answers = [_search(client, user, "where does the user park") for _ in range(3)]
    pair.standby.stop()  # mid-run
    answers += [_search(client, user, "where does the user park") for _ in range(SEARCHES)]
    assert all(any("level three" in c for c in hits) for hits in answers)
    after = REGISTRY.get_sample_value("memwell_replica_fallbacks_total", {"replica": "0"}) or 0
    assert after > fallbacks
    # Back in service once it answers the API's probe: searches reach it again.
    pair.standby.start()
    before = _scans(pair.standby_url)

    def served_by_standby() -> bool:
        assert any("level three" in c for c in _search(client, user, "where does the user park"))
        return _scans(pair.standby_url) > before

    wait_for(served_by_standby, timeout=60, interval=1.0, what="reads on the standby again")
