"""The beat schedule. Each entry says why it exists; `expires` ties it to its
interval so a backlog of missed fires never piles up."""

from __future__ import annotations

from typing import Any

from memwell.queues import Queue, TaskName

SWEEP_EVERY_S = 60.0
ANN_EVERY_S = 600.0


def beat_schedule(access_flush_every_s: float = 10.0) -> dict[str, dict[str, Any]]:
    return {
        # Searches record their hits in Redis instead of writing Postgres on the
        # request path; this moves them into access_count / last_accessed_at.
        "flush-access": {
            "task": TaskName.FLUSH_ACCESS.value,
            "schedule": access_flush_every_s,
            "options": {"queue": Queue.MAINTENANCE.value, "expires": access_flush_every_s},
        },
        # A user who grew past the ANN threshold gets a per-user HNSW index (and one
        # who shrank loses it); building one takes minutes, so this runs rarely.
        "maintain-ann-indexes": {
            "task": TaskName.MAINTAIN_ANN.value,
            "schedule": ANN_EVERY_S,
            "options": {"queue": Queue.MAINTENANCE.value, "expires": ANN_EVERY_S},
        },
        # A turn persisted but whose consolidate dispatch was lost (broker restart,
        # producer crash between commit and send) would stay pending forever.
        "sweep-pending-turns": {
            "task": TaskName.SWEEP_PENDING.value,
            "schedule": SWEEP_EVERY_S,
            "options": {"queue": Queue.MAINTENANCE.value, "expires": SWEEP_EVERY_S},
        },
    }
