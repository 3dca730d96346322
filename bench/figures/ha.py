"""Past one machine: what Sentinel's replica acknowledgement costs a producer, and
what a search costs on a streaming replica.

1. `enqueue_turn` (one turn, one round trip) against the same Valkey primary with one
   replica: by plain redis:// URL, by sentinel:// URL without waiting, and by
   sentinel:// URL waiting for one replica (`WAIT 1`, MEMWELL_REPLICA_ACKS=1, the
   default behind Sentinel). Interleaved in rounds, so load on the host hits all
   three alike.
2. POST /v1/memories/search through the API (in process) on one user's 500 memories:
   an API on the primary alone against one with MEMWELL_DATABASE_READ_URL at a hot
   standby, request by request; then the same with the standby stopped (its reads
   fall back to the primary after one failure).

    python -m bench.figures.ha                 # 2,000 enqueues per variant, 300 searches
    python -m bench.figures.ha --enqueues 500 --searches 100
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from fastapi.testclient import TestClient

from bench.harness.common import percentile
from bench.harness.host import describe_host
from memwell.core.settings import Settings, get_settings
from memwell.intake.enqueue import enqueue_turn
from memwell.local.sentinel_cluster import LOOPBACK, SentinelCluster
from memwell.local.waiting import wait_for


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def enqueue_costs(root: Path, n: int) -> dict[str, list[float]]:
    cluster = SentinelCluster(root / "sentinel")
    sentinel_url = cluster.start()
    primary = f"redis://{LOOPBACK}:{cluster.primary_port()}/0"
    variants = {
        "redis:// (no replica wait)": (primary, "0"),
        "sentinel:// no wait": (sentinel_url, "0"),
        "sentinel:// WAIT 1 (default)": (sentinel_url, "1"),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    try:
        # Paired: each turn goes out once per variant, back to back, so a burst of load
        # from elsewhere on the host lands on all three alike.
        for i in range(n):
            for name, (url, acks) in variants.items():
                os.environ["MEMWELL_REPLICA_ACKS"] = acks
                get_settings.cache_clear()
                send = partial(
                    enqueue_turn, user_id="bench-ha", session_id="s", content=f"turn {i}",
                    broker_url=url,
                )  # fmt: skip
                samples[name].append(_timed(send))
            if (i + 1) % (n // 10 or 1) == 0:
                print(f"  enqueues {i + 1}/{n}", file=sys.stderr, flush=True)
    finally:
        os.environ.pop("MEMWELL_REPLICA_ACKS", None)
        get_settings.cache_clear()
        cluster.stop()
    return samples


def search_costs(root: Path, redis_url: str, n: int) -> dict[str, list[float]]:
    from api.main import create_app
    from memwell.db import migrate
    from memwell.local.embedded import EmbeddedPostgres
    from memwell.local.postgres_standby import start_standby

    primary = EmbeddedPostgres(pgdata=root / "primary", database="bench_ha")
    primary_url = primary.start()
    migrate.upgrade(primary_url)
    base = {
        "DATABASE_URL": primary_url, "REDIS_URL": redis_url, "MEMWELL_AUTH_DISABLED": True,
        "MEMWELL_EMBEDDING_PROVIDER": "local", "MEMWELL_RATE_LIMIT_PER_S": 0,
        "MEMWELL_LOG_LEVEL": "WARNING",
    }  # fmt: skip
    samples: dict[str, list[float]] = {}
    standby = None
    try:
        standby, standby_url = start_standby(primary_url, root / "standby")
        routed = Settings(**base, MEMWELL_DATABASE_READ_URL=standby_url)  # type: ignore[arg-type]
        with (
            TestClient(create_app(Settings(**base))) as alone,  # type: ignore[arg-type]
            TestClient(create_app(routed)) as with_standby,
        ):
            for start in range(0, 500, 100):
                memories = [{"content": f"The user keeps item {i} in drawer {i % 37}."}
                            for i in range(start, start + 100)]  # fmt: skip
                alone.post("/v1/memories", json={"user_id": "u1", "memories": memories})
            wait_for(lambda: _standby_has(standby_url, 500), timeout=120, what="replay")
            # Interleaved, request by request: load from elsewhere hits both alike.
            a, b = _searches([alone, with_standby], n)
            samples["primary only"], samples["on the standby"] = a, b
            standby.stop()
            a, b = _searches([alone, with_standby], n)
            samples["primary only (2nd run)"], samples["standby stopped (fallback)"] = a, b
    finally:
        if standby is not None:
            standby.stop()
        primary.stop()
    return samples


def _standby_has(url: str, n: int) -> bool:
    import psycopg

    from memwell.db.driver import libpq_url

    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SELECT count(*) FROM memories").fetchone()
    return bool(row and row[0] >= n)


def _searches(clients: list[TestClient], n: int) -> list[list[float]]:
    body = {"user_id": "u1", "query": "which drawer holds item 12"}
    for client in clients:
        for _ in range(10):  # warm: the statement prepared, the pools filled
            client.post("/v1/memories/search", json=body)
    out: list[list[float]] = [[] for _ in clients]
    for _ in range(n):
        for samples, client in zip(out, clients, strict=True):
            started = time.perf_counter()
            response = client.post("/v1/memories/search", json=body)
            samples.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.text
    return out


def _table(title: str, samples: dict[str, list[float]], baseline: str) -> None:
    """p50/p95 per variant, and the median of the paired differences to the baseline
    (sample i of each variant ran back to back)."""
    print(f"\n{title}")
    print(f"{'variant':<32}{'n':>6}{'p50 ms':>9}{'p95 ms':>9}{'median added ms':>17}")
    base = samples[baseline]
    for name, values in samples.items():
        added = [v - b for v, b in zip(values, base, strict=False)]
        print(
            f"{name:<32}{len(values):>6}{percentile(values, 50):>9.3f}"
            f"{percentile(values, 95):>9.3f}{percentile(added, 50):>+17.3f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--enqueues", type=int, default=2000)
    parser.add_argument("--searches", type=int, default=300)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = Path(tempfile.mkdtemp(prefix="bench-ha-"))
    print(f"host: {describe_host()}")
    enqueues = enqueue_costs(root, args.enqueues)
    _table("enqueue_turn, one turn (Valkey primary + 1 replica, loopback)", enqueues,
           "redis:// (no replica wait)")  # fmt: skip
    if not args.searches:
        return 0
    from memwell.local.embedded import EmbeddedRedis

    redis_server = EmbeddedRedis(data_dir=root / "redis", appendonly=False)
    try:
        searches = search_costs(root, redis_server.start(), args.searches)
    finally:
        redis_server.stop()
    _table("POST /v1/memories/search, 500 memories of one user (in-process API)", searches,
           "primary only")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
