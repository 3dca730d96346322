"""Batch counters in Redis, so the micro-batching is visible, not assumed.

`mw:stats:consolidate` holds batches, turns, candidates and the milliseconds spent
in analyze/embed/reconcile; turns/batches is the mean batch size the embedder saw.
"""

from __future__ import annotations

import redis

from memwell.pipeline.consolidate import ConsolidationReport

STATS_KEY = "mw:stats:consolidate"


def record_batch(client: redis.Redis, report: ConsolidationReport) -> None:
    """Count one consolidate batch (nothing when it claimed no turns)."""
    if not report.turns:
        return
    with client.pipeline(transaction=False) as pipe:
        pipe.hincrby(STATS_KEY, "batches", 1)
        pipe.hincrby(STATS_KEY, "turns", report.turns)
        pipe.hincrby(STATS_KEY, "candidates", report.candidates)
        pipe.hincrbyfloat(STATS_KEY, "analyze_ms", report.analyze_ms)
        pipe.hincrbyfloat(STATS_KEY, "embed_ms", report.embed_ms)
        pipe.hincrbyfloat(STATS_KEY, "reconcile_ms", report.reconcile_ms)
        pipe.execute()


def read_stats(client: redis.Redis) -> dict[str, float]:
    raw = client.hgetall(STATS_KEY)
    return {k.decode() if isinstance(k, bytes) else str(k): float(v) for k, v in raw.items()}
