"""The four jobs bound to the settings: what the beat tasks and `memwell maintenance`
both call, so a manual run does exactly what the schedule does."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import redis
from sqlalchemy.orm import Session, sessionmaker

from memwell.buffer.session_buffer import SyncSessionBuffer
from memwell.core.queues import Queue
from memwell.core.settings import Settings
from memwell.intake.dispatch import declare_queues, resend_from_inbox, send_consolidate
from memwell.maintenance.batches import Cursor, JobReport
from memwell.maintenance.decay import decay_memories
from memwell.maintenance.prune import PrunePolicy, prune_memories
from memwell.maintenance.retention import RetentionPolicy
from memwell.maintenance.sessions import close_idle_sessions
from memwell.maintenance.sweep import SweepPolicy, resend_stale_inbox, sweep_pending

#: The queues whose depth means "pending turns are queued, not lost". In LLM mode
#: consolidation runs on the llm queue (queues.pipeline_queue), so it counts too.
CONSOLIDATION_QUEUES = (Queue.INGEST.value, Queue.EMBED.value, Queue.LLM.value)


def run_decay(
    sessions: sessionmaker[Session],
    settings: Settings,
    *,
    now: datetime,
    dry_run: bool = False,
    cursor: Cursor | None = None,
) -> JobReport:
    return decay_memories(
        sessions,
        now=now,
        policy=RetentionPolicy.from_settings(settings),
        batch_size=settings.maintenance_batch_size,
        max_batches=settings.maintenance_max_batches,
        dry_run=dry_run,
        cursor=cursor,
    )


def run_prune(
    sessions: sessionmaker[Session],
    settings: Settings,
    *,
    now: datetime,
    dry_run: bool = False,
    cursor: Cursor | None = None,
) -> JobReport:
    return prune_memories(
        sessions,
        now=now,
        policy=PrunePolicy.from_settings(settings),
        batch_size=settings.maintenance_batch_size,
        max_batches=settings.maintenance_max_batches,
        dry_run=dry_run,
        cursor=cursor,
    )


def run_close_idle(
    sessions: sessionmaker[Session],
    settings: Settings,
    redis_client: redis.Redis,
    *,
    now: datetime,
    dry_run: bool = False,
    cursor: Cursor | None = None,
    summarize: Callable[..., str] | None = None,
    deadline: float | None = None,
) -> JobReport:
    """Close idle sessions; `summarize` (default: the local extractive summary) writes
    each one's summary. Workers pass the pipeline's, which leaves a `summary` memory,
    and a `deadline` (time.monotonic()) inside their time limit."""
    buffer = SyncSessionBuffer(
        redis_client, token_budget=settings.buffer_token_budget, ttl_s=settings.buffer_ttl_s
    )
    return close_idle_sessions(
        sessions,
        now=now,
        idle=timedelta(minutes=settings.idle_session_minutes),
        buffer=buffer,
        batch_size=settings.maintenance_batch_size,
        max_batches=settings.maintenance_max_batches,
        dry_run=dry_run,
        cursor=cursor,
        deadline=deadline,
        **({"summarize": summarize} if summarize else {}),
    )


def consolidation_backlog(redis_client: redis.Redis) -> int:
    """Messages waiting in the consolidation queues (Celery's Redis lists)."""
    return sum(int(redis_client.llen(q)) for q in CONSOLIDATION_QUEUES)


def run_sweep(
    sessions: sessionmaker[Session],
    settings: Settings,
    redis_client: redis.Redis,
    *,
    broker_url: str,
    now: datetime,
    dry_run: bool = False,
) -> JobReport:
    declared = False

    def dispatch(tenant: str, turn_ids: list[str]) -> None:
        nonlocal declared
        if not declared:  # once per run, and only when there is something to send
            declare_queues(broker_url)
            declared = True
        send_consolidate(tenant, turn_ids, broker_url=broker_url)

    backlog = consolidation_backlog(redis_client)
    report = sweep_pending(
        sessions,
        now=now,
        policy=SweepPolicy(
            older_than=timedelta(seconds=settings.sweep_after_s),
            max_attempts=settings.sweep_max_attempts,
            chunk=settings.embedding_batch_size,
        ),
        dispatch=dispatch,
        batch_size=settings.maintenance_batch_size,
        max_batches=settings.maintenance_max_batches,
        backlog=backlog,
        backlog_threshold=settings.sweep_backlog_threshold,
        report_since=now - timedelta(seconds=settings.sweep_every_s),
        dry_run=dry_run,
    )
    if backlog > settings.sweep_backlog_threshold:
        return report  # queued payloads are on their way; re-sending would pile on
    report.counts["inbox_resent"] = resend_stale_inbox(
        redis_client,
        older_than_s=settings.sweep_after_s,
        now=now,
        send=lambda task_id, body: resend_from_inbox(task_id, body, broker_url=broker_url),
        limit=settings.maintenance_batch_size,
        dry_run=dry_run,
    )
    return report
