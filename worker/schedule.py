"""The beat schedule. Each entry says why it exists; `expires` ties it to its
interval so a backlog of missed fires never piles up (a fire not started within
one interval is dropped: the next one does the same work). Intervals are settings.
Beat only fires light tasks; each takes a Redis lock and works in bounded batches."""

from __future__ import annotations

from typing import Any

from memwell.core.queues import Queue, TaskName
from memwell.core.settings import Settings

ANN_EVERY_S = 600.0
REEMBED_TICK_EVERY_S = 60.0


def _entry(task: TaskName, every_s: float) -> dict[str, Any]:
    return {
        "task": task.value,
        "schedule": every_s,
        "options": {"queue": Queue.MAINTENANCE.value, "expires": every_s},
    }


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    return {
        # Searches record their hits in Redis instead of writing Postgres on the
        # request path; this moves them into access_count / last_accessed_at.
        "flush-access": _entry(TaskName.FLUSH_ACCESS, settings.access_flush_every_s),
        # A user who grew past the ANN threshold gets a per-user HNSW index (and one
        # who shrank loses it); building one takes minutes, so this runs rarely.
        "maintain-ann-indexes": _entry(TaskName.MAINTAIN_ANN, ANN_EVERY_S),
        # A huge user's new memories skip their HNSW index (inserting into it was half
        # of a batch) and are searched exactly until this moves them in.
        "fold-ann-tails": _entry(TaskName.FOLD_ANN_TAILS, settings.ann_fold_every_s),
        # A turn persisted but whose consolidate dispatch was lost (broker restart,
        # producer crash between commit and send, a consolidate task that gave up)
        # would stay pending forever. Also surfaces new dead letters in the log.
        "sweep-pending-turns": _entry(TaskName.SWEEP_PENDING, settings.sweep_every_s),
        # Unused memories fade: store the retention strength so ranking and operators
        # see it, and prune has a cheap first signal.
        "decay-memories": _entry(TaskName.DECAY, settings.decay_every_s),
        # Expired (per memory or by the per-kind TTL) and faded memories become
        # tombstones; tombstones past the grace period are deleted for good.
        "prune-memories": _entry(TaskName.PRUNE, settings.prune_every_s),
        # A session nobody talks to any more gets its summary written and its Redis
        # buffer freed, instead of holding memory until the buffer TTL.
        "close-idle-sessions": _entry(TaskName.CLOSE_IDLE_SESSIONS, settings.close_idle_every_s),
        # A re-embed continues by chaining its own steps; a worker killed between two
        # steps breaks the chain, and a finished one's old vectors wait for the grace
        # period. This re-sends the step in both cases.
        "reembed-tick": _entry(TaskName.REEMBED_TICK, REEMBED_TICK_EVERY_S),
    }
