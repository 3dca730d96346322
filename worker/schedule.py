"""The beat schedule. Each entry says why it exists; `expires` ties it to its
interval so a backlog of missed fires never piles up."""

from __future__ import annotations

from typing import Any

from memwell.queues import Queue, TaskName

SWEEP_EVERY_S = 60.0


def beat_schedule() -> dict[str, dict[str, Any]]:
    return {
        # A turn persisted but whose consolidate dispatch was lost (broker restart,
        # producer crash between commit and send) would stay pending forever.
        "sweep-pending-turns": {
            "task": TaskName.SWEEP_PENDING.value,
            "schedule": SWEEP_EVERY_S,
            "options": {"queue": Queue.MAINTENANCE.value, "expires": SWEEP_EVERY_S},
        },
    }
