"""Queue and task names. They are a public contract: producers in other codebases
send tasks by these strings, so they never change meaning."""

from __future__ import annotations

from enum import StrEnum


class Queue(StrEnum):
    INGEST = "ingest"  # fast, no network: persist turns
    LLM = "llm"  # rate-limited calls to the model endpoint
    EMBED = "embed"  # batched embedding and storing of memories
    MAINTENANCE = "maintenance"  # beat jobs


class TaskName(StrEnum):
    INGEST_TURNS = "memwell.ingest_turns"
    CONSOLIDATE_TURNS = "memwell.consolidate_turns"
    SWEEP_PENDING = "memwell.sweep_pending"
    DECAY = "memwell.maintenance.decay"
    PRUNE = "memwell.maintenance.prune"
    CLOSE_IDLE_SESSIONS = "memwell.maintenance.close_idle_sessions"


TASK_QUEUES: dict[TaskName, Queue] = {
    TaskName.INGEST_TURNS: Queue.INGEST,
    TaskName.CONSOLIDATE_TURNS: Queue.EMBED,
    TaskName.SWEEP_PENDING: Queue.MAINTENANCE,
    TaskName.DECAY: Queue.MAINTENANCE,
    TaskName.PRUNE: Queue.MAINTENANCE,
    TaskName.CLOSE_IDLE_SESSIONS: Queue.MAINTENANCE,
}
