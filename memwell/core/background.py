"""Work a request starts and does not wait for (access tracking, summary requests)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)

# The loop keeps only weak references to its tasks: without these, one could be
# collected mid-flight.
_pending: set[asyncio.Task[Any]] = set()


def spawn(work: Coroutine[Any, Any, Any], *, what: str) -> None:
    """Run `work` on the running loop; a failure is logged as `what`, never raised."""
    task = asyncio.get_running_loop().create_task(work)
    _pending.add(task)

    def _done(t: asyncio.Task[Any]) -> None:
        _pending.discard(t)
        if not t.cancelled() and t.exception() is not None:
            log.warning("%s failed: %s", what, t.exception())

    task.add_done_callback(_done)
