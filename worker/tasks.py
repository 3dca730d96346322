"""Celery tasks: thin wrappers that parse, open one transaction, and call one
pipeline function. Arguments are keyword-only ids and plain data, never objects."""

from __future__ import annotations

import logging
import time
from typing import Any

import kombu.exceptions
import redis
import redis.exceptions
import sqlalchemy.exc
from celery import Task
from celery.exceptions import SoftTimeLimitExceeded
from pydantic import ValidationError

from memwell.auth.size_limits import check_turns
from memwell.core import stack
from memwell.core.errors import TooLarge
from memwell.core.log_throttle import LogThrottle
from memwell.core.queues import TaskName
from memwell.core.redaction import describe
from memwell.core.redis_clients import sync_client
from memwell.core.settings import get_settings
from memwell.db.tenancy import tenant_transaction
from memwell.intake import redis_inbox
from memwell.intake.dead_letters import record_dead_letter, validation_summary
from memwell.intake.dispatch import send_consolidate
from memwell.intake.persist import persist_turns
from memwell.intake.turns import IngestPayload
from memwell.llm.provider_rate_limit import RateLimited
from memwell.pipeline.isolation import consolidate_isolated, reopen_quarantined
from memwell.pipeline.stats import record_batch
from memwell.pipeline.summarize import TurnsNotPersisted, fold_into_summary
from memwell.retrieval.access import flush_access
from memwell.retrieval.ann import fold_ann_tails, maintain_ann_indexes
from worker.celery_app import app
from worker.runtime import get_redis, get_runtime

log = logging.getLogger(__name__)
#: While the database refuses dead letters, one line per task and error a minute.
throttled = LogThrottle(log)

# Worth retrying: the database or broker is briefly away. Anything else is a bug or
# bad data, and retrying would only delay the dead letter.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    sqlalchemy.exc.TimeoutError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    # A publish the broker refused (Celery's producer wraps the Redis error): the
    # ingest task's consolidate dispatch, during a Redis outage.
    kombu.exceptions.OperationalError,
    ConnectionError,
    TimeoutError,
    RateLimited,  # the shared model budget is spent for now
    TurnsNotPersisted,  # a summary waits for its turns' ingest
)

#: Not a batch's fault: a consolidate batch that fails with one of these is not run
#: again user by user (memwell/pipeline/isolation.py); the task retries or stops.
PASSING_ERRORS: tuple[type[BaseException], ...] = (*TRANSIENT_ERRORS, SoftTimeLimitExceeded)

ACCESS_FLUSH_ROUNDS = 20  # bounded: at most this many batches per beat tick
MAX_CLAIM_ROUNDS = 100  # per chunk of a consolidate task's own turns
REDISPATCH_DELAY_S = 0.2  # turns whose users are all held elsewhere try again after this
#: A consolidate task's model work stops at this share of its soft time limit: the
#: rest of the limit is for embedding and writing what was analysed, and one last call.
MODEL_WORK_SHARE = 0.5
CONSOLIDATE_SOFT_LIMIT_S = get_settings().consolidate_soft_limit_s


class MemwellTask(Task[Any, Any]):
    """Retries transient failures with backoff; a task that fails for good becomes a
    dead letter instead of vanishing into a log.

    Backoff doubles from 2 s up to 120 s, with full jitter (each wait is drawn from
    0..cap, so a herd of retries spreads out when Postgres comes back). Ten retries
    wait 0..606 s in total, which may be short of a long outage: that is fine for
    tasks whose input is already in Postgres (a consolidate task that gives up leaves
    its turns pending, and the sweeper re-dispatches them). `ingest_turns` overrides
    it: its payload lives only in the broker, so it never gives up on a transient
    error."""

    autoretry_for = TRANSIENT_ERRORS
    retry_backoff = 2
    retry_backoff_max = 120
    retry_jitter = True
    max_retries: int | None = 10
    acks_late = True

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        tenant = kwargs.get("tenant") or (kwargs.get("payload") or {}).get("tenant")
        _dead_letter(self.name, dict(kwargs), describe(exc), tenant)


def _dead_letter(task_name: str, payload: dict[str, Any], error: str, tenant: Any) -> None:
    try:
        with get_runtime().sessions.begin() as session:
            record_dead_letter(
                session,
                task_name=task_name,
                payload=payload,
                error=error,
                tenant=tenant if isinstance(tenant, str) and 0 < len(tenant) <= 128 else None,
            )
    except Exception as exc:  # the database may be the reason we are here
        throttled.log(
            logging.ERROR, (task_name, type(exc)),
            "could not record dead letter for %s: %s", task_name, error, exc_info=True,
        )  # fmt: skip


def _inbox_done(task_id: object) -> None:
    """The payload is persisted (or dead-lettered): the sweeper need not re-send it.
    Best effort: a leftover entry only costs one idempotent re-send."""
    if not isinstance(task_id, str):
        return
    try:
        redis_inbox.done(get_redis(), task_id)
    except redis.exceptions.RedisError:
        log.warning("could not clear inbox entry %s; the sweeper will re-send it", task_id)


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.INGEST_TURNS.value,
    soft_time_limit=30,
    time_limit=60,
    # The payload exists nowhere but in this message: giving up would lose turns that
    # enqueue_turn acknowledged. Retry transient errors (Postgres down) until it is
    # back, every <= 60 s.
    max_retries=None,
    retry_backoff_max=60,
)
def ingest_turns(self: MemwellTask, *, payload: dict[str, Any]) -> dict[str, int]:
    """Persist a batch of turns, then dispatch their consolidation."""
    try:
        parsed = IngestPayload.model_validate(payload)
    except ValidationError as exc:
        # A poison message: retrying cannot fix it. Keep it, and keep the worker alive.
        # Keep its tenant when it names one, so a user's erasure can find the letter.
        tenant = payload.get("tenant") if isinstance(payload, dict) else None
        error = f"invalid payload: {validation_summary(exc)}"
        _dead_letter(self.name, {"payload": payload}, error, tenant)
        _inbox_done(self.request.id)
        return {"rejected": 1, "persisted": 0}
    try:
        # The operator's limits, as every door applies them (a raw producer skips them).
        check_turns(parsed.turns, get_runtime().settings)
    except TooLarge as exc:
        _dead_letter(self.name, {"payload": payload}, f"over a limit: {exc}", parsed.tenant)
        _inbox_done(self.request.id)
        return {"rejected": 1, "persisted": 0}
    with tenant_transaction(get_runtime().tenant_sessions, parsed.tenant) as session:
        new_ids = persist_turns(session, parsed)
    _inbox_done(self.request.id)
    send_consolidate(
        parsed.tenant,
        [t.id for t in parsed.turns],
        broker_url=stack.redis_url(get_runtime().settings),
        request_id=parsed.request_id,
    )
    return {"rejected": 0, "persisted": len(new_ids)}


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.CONSOLIDATE_TURNS.value,
    soft_time_limit=CONSOLIDATE_SOFT_LIMIT_S,
    time_limit=CONSOLIDATE_SOFT_LIMIT_S + 60,
)
def consolidate_turns(
    self: MemwellTask, *, tenant: str, turn_ids: list[str], reopen_failed: bool = False
) -> dict[str, int]:
    """Score, extract, embed and reconcile pending turns (these first), in batches.

    One batch (one short transaction) per `batch_size` of this task's own turns, each
    topped up with other pending turns, so no turn of this task is left behind when
    the payload is larger than a batch. Model work has a deadline inside the soft
    time limit: past it, what was analysed commits and the rest goes to a new task,
    so a slow model makes slow progress instead of a timed-out task. A batch that fails
    is consolidated again user by user, so one user's poison fails only that user's
    turns (memwell/pipeline/isolation.py). `reopen_failed`: the replay of a quarantine
    letter, whose turns are opened again first."""
    runtime = get_runtime()
    steps = runtime.steps
    size = steps.config.batch_size
    deadline = time.monotonic() + CONSOLIDATE_SOFT_LIMIT_S * MODEL_WORK_SHARE
    totals: dict[str, int] = {"turns": 0, "memories_added": 0, "batches": 0}
    if reopen_failed:
        with tenant_transaction(runtime.tenant_sessions, tenant) as session:
            reopen_quarantined(session, tenant=tenant, turn_ids=turn_ids)
    for start in range(0, max(len(turn_ids), 1), size):
        chunk = turn_ids[start : start + size]
        if totals["batches"] and time.monotonic() >= deadline:
            _hand_back(tenant, turn_ids[start:])
            break
        # A batch claims whole users. A user another worker holds is skipped: its
        # turns here come back as deferred, and are claimed again after this batch.
        for _ in range(MAX_CLAIM_ROUNDS):
            # Row-level security: this batch runs as `memwell_app` for this tenant only.
            outcome = consolidate_isolated(
                runtime.tenant_sessions,
                runtime.embedder,
                tenant=tenant,
                turn_ids=chunk,
                config=steps.config,
                analyzer=steps.analyzer,
                decider=steps.decider,
                deadline=deadline,
                passing=PASSING_ERRORS,
                task_name=self.name,
            )
            report = outcome.report
            # A user that failed alone is retried by a task of its own, later.
            _hand_back(tenant, list(outcome.retry), delay_s=outcome.retry_after_s)
            record_batch(runtime.redis, report)
            totals["turns"] += report.turns
            totals["memories_added"] += report.memories_added
            totals["batches"] += 1 if report.turns else 0
            chunk = list(report.deferred)
            if not chunk or not report.turns or time.monotonic() >= deadline:
                break
        if chunk:
            # Nothing else was free (their users' holders are mid-batch), or the model
            # work is out of time. Rather than wait, hand these turns a task of their
            # own, a moment later.
            _hand_back(tenant, chunk)
    return totals


def _hand_back(tenant: str, turn_ids: list[str], delay_s: float = REDISPATCH_DELAY_S) -> None:
    """A new consolidate task for turns left pending, a moment (`delay_s`) from now."""
    if turn_ids:
        send_consolidate(
            tenant,
            turn_ids,
            broker_url=stack.redis_url(get_runtime().settings),
            countdown=delay_s,
        )


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.SUMMARIZE_SESSION.value,
    soft_time_limit=120,
    time_limit=180,
)
def summarize_session(
    self: MemwellTask, *, tenant: str, user_id: str, session_id: str, turn_ids: list[str]
) -> dict[str, int]:
    """Fold turns evicted from the session buffer into the running summary."""
    runtime = get_runtime()
    with runtime.sessions.begin() as session:
        result = fold_into_summary(
            session,
            runtime.steps.summarizer,
            tenant=tenant,
            user_id=user_id,
            session_id=session_id,
            turn_ids=turn_ids,
        )
    if result.folded and result.summary:
        # After the commit: the chat path reads the summary from the buffer's key.
        runtime.buffer.set_summary(tenant, user_id, session_id, result.summary)
    return {"folded": result.folded, "dropped": result.dropped}


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.FLUSH_ACCESS.value,
    soft_time_limit=50,
    time_limit=60,
)
def flush_access_task(self: MemwellTask) -> dict[str, int]:
    """Drain recorded search hits into access_count / last_accessed_at, in batches."""
    runtime = get_runtime()
    client = sync_client(stack.redis_url(runtime.settings))
    consumed = 0
    try:
        for _ in range(ACCESS_FLUSH_ROUNDS):
            with runtime.sessions.begin() as session:
                n = flush_access(session, client, batch=runtime.settings.access_flush_batch)
            consumed += n
            if n < runtime.settings.access_flush_batch:
                break
    finally:
        client.close()
    return {"consumed": consumed}


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.MAINTAIN_ANN.value,
    soft_time_limit=3000,
    time_limit=3300,
)
def maintain_ann_task(self: MemwellTask) -> dict[str, int]:
    """Create or drop per-user ANN indexes around the size threshold."""
    runtime = get_runtime()
    engine = runtime.sessions.kw["bind"]
    changes = maintain_ann_indexes(engine, threshold=runtime.settings.ann_threshold_rows)
    return {
        "created": sum(c.action == "created" for c in changes),
        "rebuilt": sum(c.action == "rebuilt" for c in changes),
        "dropped": sum(c.action == "dropped" for c in changes),
    }


@app.task(
    base=MemwellTask,
    bind=True,
    name=TaskName.FOLD_ANN_TAILS.value,
    soft_time_limit=50,
    time_limit=60,
)
def fold_ann_tails_task(self: MemwellTask) -> dict[str, int]:
    """Move the rows written since each huge user's ANN index was built into it."""
    runtime = get_runtime()
    return {"folded": fold_ann_tails(runtime.sessions.kw["bind"])}
