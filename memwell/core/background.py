"""Work a request starts and does not wait for (access tracking, summary requests), or
waits for without letting its own cancellation stop it (a streamed chat's write)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

from memwell.core.redaction import describe

log = logging.getLogger(__name__)
T = TypeVar("T")

# The loop keeps only weak references to its tasks: without these, one could be
# collected mid-flight.
_pending: set[asyncio.Task[Any]] = set()


def spawn(work: Coroutine[Any, Any, T], *, what: str) -> asyncio.Task[T]:
    """Run `work` on the running loop; a failure is logged as `what`, never raised here.
    The task is returned for a caller that awaits it through `asyncio.shield`."""
    task = asyncio.get_running_loop().create_task(work)
    _pending.add(task)

    def _done(t: asyncio.Task[Any]) -> None:
        _pending.discard(t)
        if not t.cancelled() and (exc := t.exception()) is not None:
            # The error's kind only: its text may quote what the user wrote.
            log.warning("%s failed: %s", what, describe(exc))

    task.add_done_callback(_done)
    return task
