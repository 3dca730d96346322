"""Queue and task names. They are a public contract: producers in other codebases
send tasks by these strings, so they never change meaning."""

from __future__ import annotations

from enum import StrEnum

from kombu import Exchange
from kombu import Queue as KombuQueue


class Queue(StrEnum):
    INGEST = "ingest"  # fast, no network: persist turns
    LLM = "llm"  # rate-limited calls to the model endpoint
    EMBED = "embed"  # batched embedding and storing of memories
    MAINTENANCE = "maintenance"  # beat jobs


#: Every queue, and every queue but the model's: a worker's `--queues` list.
ALL_QUEUES = ",".join(q.value for q in Queue)
NON_LLM_QUEUES = ",".join(q.value for q in Queue if q is not Queue.LLM)


class TaskName(StrEnum):
    INGEST_TURNS = "memwell.ingest_turns"
    CONSOLIDATE_TURNS = "memwell.consolidate_turns"
    SWEEP_PENDING = "memwell.sweep_pending"
    SUMMARIZE_SESSION = "memwell.summarize_session"
    FLUSH_ACCESS = "memwell.flush_access"
    MAINTAIN_ANN = "memwell.maintain_ann_indexes"
    FOLD_ANN_TAILS = "memwell.fold_ann_tails"
    DECAY = "memwell.maintenance.decay"
    PRUNE = "memwell.maintenance.prune"
    CLOSE_IDLE_SESSIONS = "memwell.maintenance.close_idle_sessions"
    REEMBED_STEP = "memwell.reembed.step"
    REEMBED_TICK = "memwell.reembed.tick"


TASK_QUEUES: dict[TaskName, Queue] = {
    TaskName.INGEST_TURNS: Queue.INGEST,
    TaskName.CONSOLIDATE_TURNS: Queue.EMBED,
    TaskName.SWEEP_PENDING: Queue.MAINTENANCE,
    TaskName.SUMMARIZE_SESSION: Queue.INGEST,
    TaskName.FLUSH_ACCESS: Queue.MAINTENANCE,
    TaskName.MAINTAIN_ANN: Queue.MAINTENANCE,
    TaskName.FOLD_ANN_TAILS: Queue.MAINTENANCE,
    TaskName.DECAY: Queue.MAINTENANCE,
    TaskName.PRUNE: Queue.MAINTENANCE,
    TaskName.CLOSE_IDLE_SESSIONS: Queue.MAINTENANCE,
    TaskName.REEMBED_STEP: Queue.MAINTENANCE,
    TaskName.REEMBED_TICK: Queue.MAINTENANCE,
}


def pipeline_queue(uses_llm: bool, *, local: Queue) -> Queue:
    """Where a pipeline task goes: the rate-limited `llm` queue when its steps call
    the model endpoint, else its local queue (`embed` for consolidation, `ingest`
    for summaries)."""
    return Queue.LLM if uses_llm else local


def kombu_queues() -> list[KombuQueue]:
    """The broker-side queues. One direct exchange per queue: without it Celery binds
    every queue to the default exchange under one routing key, which fans a message
    out to all of them on transports that honour bindings."""
    return [
        KombuQueue(q.value, Exchange(q.value, type="direct"), routing_key=q.value) for q in Queue
    ]
