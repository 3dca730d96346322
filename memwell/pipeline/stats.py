"""Batch counters in Redis, so the micro-batching is visible, not assumed.

`mw:stats:consolidate` holds batches, turns, candidates, users and the milliseconds
spent in analyze/embed/reconcile and waiting for users' locks; turns/batches is the
mean batch size the embedder saw, users/batches the batch's mean composition, and
reconcile_ms/users the reconcile time per user. The same figures go to Prometheus.
"""

from __future__ import annotations

import redis

from memwell.core.metrics import (
    CONSOLIDATE_BATCH_USERS,
    CONSOLIDATE_LOCK_WAIT_SECONDS,
    CONSOLIDATE_RECONCILE_SECONDS,
)
from memwell.pipeline.consolidate import ConsolidationReport

STATS_KEY = "mw:stats:consolidate"


def record_batch(client: redis.Redis, report: ConsolidationReport) -> None:
    """Count one consolidate batch (only its lock wait when it claimed no turns)."""
    if report.turns or report.lock_wait_ms:  # an empty claim may still have waited
        CONSOLIDATE_LOCK_WAIT_SECONDS.observe(report.lock_wait_ms / 1000.0)
    if not report.turns:
        if report.lock_wait_ms:
            client.hincrbyfloat(STATS_KEY, "lock_wait_ms", report.lock_wait_ms)
        return
    CONSOLIDATE_BATCH_USERS.observe(report.users)
    CONSOLIDATE_RECONCILE_SECONDS.labels("batch").observe(report.reconcile_ms / 1000.0)
    if report.users:
        per_user = report.reconcile_ms / report.users / 1000.0
        CONSOLIDATE_RECONCILE_SECONDS.labels("user").observe(per_user)
    with client.pipeline(transaction=False) as pipe:
        pipe.hincrby(STATS_KEY, "batches", 1)
        pipe.hincrby(STATS_KEY, "turns", report.turns)
        pipe.hincrby(STATS_KEY, "candidates", report.candidates)
        pipe.hincrbyfloat(STATS_KEY, "analyze_ms", report.analyze_ms)
        pipe.hincrbyfloat(STATS_KEY, "embed_ms", report.embed_ms)
        pipe.hincrbyfloat(STATS_KEY, "reconcile_ms", report.reconcile_ms)
        pipe.hincrby(STATS_KEY, "users", report.users)
        pipe.hincrbyfloat(STATS_KEY, "lock_wait_ms", report.lock_wait_ms)
        pipe.execute()


def read_stats(client: redis.Redis) -> dict[str, float]:
    raw = client.hgetall(STATS_KEY)
    return {k.decode() if isinstance(k, bytes) else str(k): float(v) for k, v in raw.items()}
