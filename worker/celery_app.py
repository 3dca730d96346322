"""The Celery application: queues, routing and the reliability settings.

Reliability, and why:
- acks_late + reject_on_worker_lost: a task is acknowledged only after it ran, so a
  worker killed mid-task (even by SIGKILL) leaves the message to be redelivered.
- prefetch 1: a worker holds at most one unacknowledged message per process, so a
  crash strands little and long tasks do not starve their neighbours.
- visibility_timeout (MEMWELL_VISIBILITY_TIMEOUT_S, default 3600 s): on the Redis
  broker an unacknowledged message returns to its queue after this long. It must
  exceed the longest task's time_limit, or a slow task runs twice (harmless, since
  every task is idempotent, but wasteful).
- tasks are idempotent, so redelivery is safe.

Broker outages, of any length:
- the connection is retried forever (broker_connection_max_retries=None): Celery's
  default gives up after 100 attempts (about 50 minutes) and the worker exits;
- the transport is worker/broker_transport.py's, which keeps a channel usable after
  its connection closed (Kombu's own raised an AttributeError that stopped the worker);
- tasks running when the connection drops finish their work (Postgres is still
  there) rather than being killed (worker_cancel_long_running_tasks_on_connection_
  loss=False); the transport puts their messages back on reconnect, so each such task
  may run twice, which idempotent tasks allow. Celery's warning about this setting
  on every connection loss is expected.
"""

from __future__ import annotations

from celery import Celery

from memwell.core import stack
from memwell.core.queues import TASK_QUEUES, Queue, kombu_queues
from memwell.core.redis_target import celery_broker
from memwell.core.settings import Settings
from memwell.core.settings_errors import settings_or_exit
from worker import heartbeat, observability, privileges  # noqa: F401  (signal handlers)
from worker.broker_transport import transport_for
from worker.schedule import beat_schedule


def create_app(settings: Settings | None = None) -> Celery:
    settings = settings or settings_or_exit()
    broker_url, sentinel_options = celery_broker(stack.redis_url(settings))
    app = Celery("memwell", broker=broker_url, include=["worker.tasks", "worker.maintenance"])
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        result_backend=None,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_transport_options={
            "visibility_timeout": settings.visibility_timeout_s,
            **sentinel_options,
        },
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        broker_transport=transport_for(broker_url),
        worker_cancel_long_running_tasks_on_connection_loss=False,
        task_queues=kombu_queues(),
        task_default_queue=Queue.INGEST.value,
        task_default_exchange=Queue.INGEST.value,
        task_default_routing_key=Queue.INGEST.value,
        task_routes={
            name.value: {"queue": q.value, "routing_key": q.value}
            for name, q in TASK_QUEUES.items()
        },
        task_time_limit=300,
        task_soft_time_limit=240,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        # Keeps what it cannot run as a dead letter; Celery's own logs the body.
        worker_consumer="worker.undecodable:KeepingConsumer",
        beat_schedule=beat_schedule(settings),
        timezone="UTC",
    )
    app.steps["consumer"].add(heartbeat.Heartbeat)
    return app


app = create_app()
