"""Worker logs and metrics, hooked in through Celery signals.

- Logs: Celery's own logging setup is replaced by memwell.core.logs (JSON lines). Each task
  runs with its task name, task id, request id and turn ids bound to every log line.
  The request id travels from the API in the ingest payload (`request_id`) and, to
  the tasks it fans out to, in the `request_id` message header.
- Metrics: per-task latency and outcome from task_prerun/task_postrun. The worker's
  main process serves /metrics on MEMWELL_WORKER_METRICS_PORT (0: off), aggregating
  its pool children through prometheus-client's multiprocess directory, plus the
  queue depths read from Redis at scrape time.
"""

from __future__ import annotations

import contextlib
import os
import time
from contextlib import ExitStack
from typing import Any

from celery.signals import (
    setup_logging,
    task_postrun,
    task_prerun,
    worker_process_shutdown,
    worker_ready,
)

from memwell.core import stack
from memwell.core.logs import bound, configure_logging, get_logger, wants_json
from memwell.core.metrics import (
    MULTIPROC_ENV,
    TASK_SECONDS,
    TASKS_TOTAL,
    QueueDepthCollector,
    mark_process_dead,
    scrape_registry,
)
from memwell.core.settings import get_settings

log = get_logger(__name__)

#: task id -> (start time, the log context opened for it)
_running: dict[str, tuple[float, ExitStack]] = {}


@setup_logging.connect
def _setup_logging(**_: Any) -> None:
    settings = get_settings()
    configure_logging(settings.log_level, json=wants_json(settings.log_format))


def task_context(task: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """What to bind to a task's log lines: ids only, never content."""
    payload = kwargs.get("payload") if isinstance(kwargs.get("payload"), dict) else None
    request_id = getattr(task.request, "request_id", None)
    turn_ids: list[str] | None = kwargs.get("turn_ids")
    if payload is not None:
        request_id = request_id or payload.get("request_id")
        turns = payload.get("turns")
        if isinstance(turns, list):
            turn_ids = [str(t["id"]) for t in turns if isinstance(t, dict) and t.get("id")]
    tenant = kwargs.get("tenant") or (payload or {}).get("tenant")
    return {"request_id": request_id, "tenant": tenant, "turn_ids": turn_ids}


@task_prerun.connect
def _task_started(task_id: str, task: Any, kwargs: dict[str, Any] | None = None, **_: Any) -> None:
    ctx = task_context(task, kwargs or {})
    stack_ = ExitStack()
    stack_.enter_context(
        bound(
            ctx["request_id"],
            task=task.name,
            task_id=task_id,
            tenant=ctx["tenant"],
            turn_ids=ctx["turn_ids"],
        )
    )
    _running[task_id] = (time.perf_counter(), stack_)


@task_postrun.connect
def _task_finished(task_id: str, task: Any, state: str | None = None, **_: Any) -> None:
    started, stack_ = _running.pop(task_id, (None, None))
    outcome = {"SUCCESS": "success", "RETRY": "retry", "FAILURE": "failure"}.get(
        state or "", (state or "unknown").lower()
    )
    TASKS_TOTAL.labels(task.name, outcome).inc()
    if started is not None:
        elapsed = time.perf_counter() - started
        TASK_SECONDS.labels(task.name, outcome).observe(elapsed)
        log.info("task finished", outcome=outcome, duration_ms=round(elapsed * 1000, 2))
    if stack_ is not None:
        with contextlib.suppress(ValueError):  # a context var reset from another context
            stack_.close()


@worker_ready.connect
def _serve_metrics(**_: Any) -> None:
    """Start the metrics HTTP server in the worker's main process, once logging is set
    up and the pool is forked (so no child inherits the server thread)."""
    settings = get_settings()
    port = settings.worker_metrics_port
    if not port:
        return
    if not os.environ.get(MULTIPROC_ENV):
        log.warning(
            "worker metrics without multiprocess mode show only the main process; "
            "start workers with `memwell worker` or set PROMETHEUS_MULTIPROC_DIR"
        )
    from prometheus_client import start_http_server

    registry = scrape_registry([QueueDepthCollector(stack.redis_url(settings))])
    try:
        start_http_server(port, addr=settings.worker_metrics_host, registry=registry)
    except OSError as exc:  # a taken port must not stop a worker from working
        log.error("worker metrics port unavailable", port=port, error=str(exc))
        return
    log.info("worker metrics serving", port=port)


@worker_process_shutdown.connect
def _pool_child_exit(pid: int | None = None, **_: Any) -> None:
    mark_process_dead(pid or os.getpid())
