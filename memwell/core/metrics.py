"""Prometheus metrics: every metric Memwell exports is defined here, once.

The API serves them at `/metrics`; a worker serves them on its metrics port
(`MEMWELL_WORKER_METRICS_PORT`). Celery's prefork pool runs tasks in child
processes, so workers use prometheus-client's multiprocess mode: `memwell worker`
points `PROMETHEUS_MULTIPROC_DIR` at a fresh directory before any process starts,
each child writes its samples there, and the parent's HTTP server aggregates them.
The same applies to `memwell api --workers N` with N > 1.

Queue depths are not counters anyone increments: a collector reads them from
Redis (LLEN of each queue key) at scrape time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from memwell.core.queues import Queue

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SLOW = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

# --- API -------------------------------------------------------------------------------
HTTP_REQUEST_SECONDS = Histogram(
    "memwell_http_request_duration_seconds",
    "API request latency, by route template (not raw path, to bound cardinality).",
    ["method", "route", "status"],
    buckets=_FAST,
)
API_OVERLOADED_TOTAL = Counter(
    "memwell_api_overloaded_total",
    "Requests refused with 503 at admission because the process had MEMWELL_API_MAX_INFLIGHT "
    "expensive requests in flight, by path.",
    ["path"],
)
CHAT_STAGE_SECONDS = Histogram(
    "memwell_chat_stage_duration_seconds",
    "Chat path stage timings: buffer, embed, retrieve, assemble, first_token (streamed), "
    "model, buffer_append and enqueue (concurrent), total.",
    ["stage"],
    buckets=_FAST,
)

# --- read replicas -----------------------------------------------------------------------
REPLICA_LAG_SECONDS = Gauge(
    "memwell_replica_lag_seconds",
    "How far each read replica's replay is behind the primary (0 when it has replayed "
    "everything it received), by replica index in MEMWELL_DATABASE_READ_URL; -1 while "
    "it cannot be reached.",
    ["replica"],
    multiprocess_mode="livemax",
)
REPLICA_FALLBACKS_TOTAL = Counter(
    "memwell_replica_fallbacks_total",
    "Reads a replica failed and the primary served instead, by replica index.",
    ["replica"],
)

# --- workers ---------------------------------------------------------------------------
TASK_SECONDS = Histogram(
    "memwell_task_duration_seconds",
    "Celery task run time, by task name and outcome (success, retry, failure).",
    ["task", "outcome"],
    buckets=_SLOW,
)
TASKS_TOTAL = Counter(
    "memwell_tasks_total", "Celery tasks finished, by task name and outcome.", ["task", "outcome"]
)
DEAD_LETTERS_TOTAL = Counter(
    "memwell_dead_letters_total", "Tasks that failed for good and became dead letters.", ["task"]
)
DEAD_LETTERS_NOT_KEPT_TOTAL = Counter(
    "memwell_dead_letters_not_kept_total",
    "Unreadable messages a worker could not keep as dead letters, by reason: bound (the "
    "open ones were at MEMWELL_DEAD_LETTER_RAW_MAX_OPEN), unstorable (the database "
    "refused or was away).",
    ["reason"],
)

SUMMARY_TURNS_DROPPED_TOTAL = Counter(
    "memwell_summary_turns_dropped_total",
    "Turns a summary request named that were dropped (their session cleared, their user "
    "erased) and will never be stored: skipped, where a turn still on its way is retried.",
)

# --- per stage -------------------------------------------------------------------------
LLM_CALLS_TOTAL = Counter(
    "memwell_llm_calls_total",
    "Calls to the model endpoint, by pipeline stage (chat, analyze, reconcile, summarize), "
    "tenant and outcome (ok, error).",
    ["stage", "tenant", "outcome"],
)
LLM_TOKENS_TOTAL = Counter(
    "memwell_llm_tokens_total",
    "Tokens spent at the model endpoint, by stage, tenant and direction (prompt, completion).",
    ["stage", "tenant", "direction"],
)
LLM_FALLBACKS_TOTAL = Counter(
    "memwell_llm_fallbacks_total",
    "Items a pipeline stage handed to local mode, by stage and reason (endpoint_error, "
    "unreachable, timeout, invalid_output, over_budget).",
    ["stage", "reason"],
)
LLM_DEFERRALS_TOTAL = Counter(
    "memwell_llm_deferrals_total",
    "Items a pipeline stage left for a later model call because the model ran out of "
    "time (a slow model finishes them later, in smaller windows), by stage.",
    ["stage"],
)
EMBEDDINGS_TOTAL = Counter(
    "memwell_embeddings_total",
    "Texts embedded, by use (query, memory) and model; rate() gives embeddings per second.",
    ["use", "model"],
)
EMBED_BATCH_SECONDS = Histogram(
    "memwell_embed_batch_duration_seconds",
    "Time to embed one batch, by use and model.",
    ["use", "model"],
    buckets=_FAST,
)

# --- consolidation ---------------------------------------------------------------------
CONSOLIDATE_LOCK_WAIT_SECONDS = Histogram(
    "memwell_consolidate_lock_wait_seconds",
    "Time one consolidate batch waited for its users' locks (claim and reconcile). Near "
    "zero when workers claim whole users; growth means workers queue on the same users.",
    buckets=_FAST,
)
CONSOLIDATE_RECONCILE_SECONDS = Histogram(
    "memwell_consolidate_reconcile_seconds",
    "Reconcile time of one consolidate batch (per=batch) and its mean per user in the "
    "batch (per=user).",
    ["per"],
    buckets=_FAST,
)
CONSOLIDATE_BATCH_USERS = Histogram(
    "memwell_consolidate_batch_users",
    "Users in one consolidate batch (each claimed with all its pending turns).",
    buckets=(1, 2, 4, 8, 16, 32, 64),
)


def record_llm_call(
    *, stage: str, tenant: str, prompt_tokens: int, completion_tokens: int, ok: bool = True
) -> None:
    """Count one model call and its tokens (every LLM-mode stage calls this)."""
    LLM_CALLS_TOTAL.labels(stage, tenant, "ok" if ok else "error").inc()
    if prompt_tokens:
        LLM_TOKENS_TOTAL.labels(stage, tenant, "prompt").inc(prompt_tokens)
    if completion_tokens:
        LLM_TOKENS_TOTAL.labels(stage, tenant, "completion").inc(completion_tokens)


def observe_chat_timings(timings_ms: dict[str, float]) -> None:
    for stage, ms in timings_ms.items():
        CHAT_STAGE_SECONDS.labels(stage).observe(ms / 1000.0)


class QueueDepthCollector(Collector):
    """`memwell_queue_depth{queue}`: messages waiting in each Celery queue, read at scrape
    time, plus `memwell_queue_unacked`: messages delivered but not yet acknowledged."""

    def __init__(self, redis_url: str, queues: Sequence[str] | None = None) -> None:
        self.redis_url = redis_url
        self.queues = list(queues or [q.value for q in Queue])

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily(
            "memwell_queue_depth", "Messages waiting in a Celery queue.", labels=["queue"]
        )
        unacked = GaugeMetricFamily(
            "memwell_queue_unacked", "Messages delivered to a worker and not yet acknowledged."
        )
        try:
            depths, in_flight = read_queue_depths(self.redis_url, self.queues)
        except Exception:  # a scrape must not fail because Redis blinked
            return
        for queue, n in depths.items():
            depth.add_metric([queue], n)
        unacked.add_metric([], in_flight)
        yield depth
        yield unacked


class BacklogCollector(Collector):
    """Store-side backlog, read from Postgres just before a scrape renders:
    `memwell_backlog_pending_turns`, `memwell_backlog_oldest_pending_seconds` and
    `memwell_dead_letters_open` (the counter above counts events in one process; this
    is the durable truth an alert should watch)."""

    def __init__(self, *, pending: int, oldest_pending_s: float | None, dead_letters: int) -> None:
        self.pending = pending
        self.oldest_pending_s = oldest_pending_s or 0.0
        self.dead_letters = dead_letters

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "memwell_backlog_pending_turns", "Turns persisted, not yet consolidated.", self.pending
        )
        yield GaugeMetricFamily(
            "memwell_backlog_oldest_pending_seconds",
            "Age of the oldest pending turn (0 when none).",
            self.oldest_pending_s,
        )
        yield GaugeMetricFamily(
            "memwell_dead_letters_open", "Dead letters not replayed yet.", self.dead_letters
        )


REEMBED_MEMORIES_TOTAL = Counter(
    "memwell_reembed_embedded_total",
    "Memories a re-embed gave a target-model vector (rate(): re-embed memories/s).",
)


class ReembedCollector(Collector):
    """The re-embed in flight (or the last one), read from Postgres at scrape time:
    `memwell_reembed_rows` (in scope), `memwell_reembed_rows_walked` and
    `memwell_reembed_users_switched`, labelled by state and target model."""

    def __init__(self, progress: dict[str, Any] | None) -> None:
        self.progress = progress

    def collect(self) -> Iterator[GaugeMetricFamily]:
        names = {
            "total": ("memwell_reembed_rows", "Embedded memories in the re-embed's scope."),
            "embedded": ("memwell_reembed_rows_walked", "Memories the re-embed's walk passed."),
            "switched_users": (
                "memwell_reembed_users_switched",
                "Users searched with the re-embed's target model.",
            ),
        }
        for key, (name, doc) in names.items():
            family = GaugeMetricFamily(name, doc, labels=["state", "target"])
            if self.progress is not None:
                p = self.progress
                family.add_metric([p["state"], p["target_model"]], float(p[key]))
            yield family


def read_queue_depths(redis_url: str, queues: Iterable[str]) -> tuple[dict[str, int], int]:
    """LLEN of each queue key and the size of the transport's unacked hash."""
    from memwell.core.redis_clients import sync_client

    client = sync_client(redis_url, socket_timeout=2)
    try:
        pipe = client.pipeline()
        names = list(queues)
        for q in names:
            pipe.llen(q)
        pipe.hlen("unacked")
        *lengths, unacked = pipe.execute()
        return {q: int(n) for q, n in zip(names, lengths, strict=True)}, int(unacked)
    finally:
        client.close()


def scrape_registry(extra: Iterable[Collector] = ()) -> CollectorRegistry:
    """The registry to expose: every process's samples in multiprocess mode, this
    process's otherwise; plus the given collectors."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry = CollectorRegistry()
        registry.register(_Forward(REGISTRY))
    for collector in extra:
        registry.register(collector)
    return registry


class _Forward(Collector):
    """Expose another registry's metrics through this one (keeps REGISTRY untouched)."""

    def __init__(self, source: CollectorRegistry) -> None:
        self.source = source

    def collect(self) -> Iterable[Any]:
        return self.source.collect()


def render(registry: CollectorRegistry) -> tuple[bytes, str]:
    """The exposition text and its content type."""
    return generate_latest(registry), CONTENT_TYPE_LATEST


def mark_process_dead(pid: int) -> None:
    """Tell multiprocess mode that a (pool child) process is gone, so its live gauges go."""
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
