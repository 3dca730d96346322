"""Work a request starts and does not wait for (access tracking, summary requests), or
waits for without letting its own cancellation stop it (a streamed chat's write).

Work the reply does not need (`after_reply`) starts once the reply is sent, when the
request is served inside `replying` (the API's request middleware): started at once,
its first writes would share the event loop, and the servers, with the request's own
last steps and delay the reply.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
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


@dataclass
class _Reply:
    """The reply of the request being served: sent yet, and the work waiting for it."""

    sent: bool = False
    waiting: list[tuple[Coroutine[Any, Any, Any], str]] = field(default_factory=list)

    def release(self) -> None:
        self.sent = True
        while self.waiting:
            work, what = self.waiting.pop(0)
            spawn(work, what=what)


_reply: ContextVar[_Reply | None] = ContextVar("memwell_reply", default=None)


def after_reply(work: Coroutine[Any, Any, Any], *, what: str) -> None:
    """Run `work` as `spawn` does, once the reply of the request being served is sent
    (outside `replying`, or after the reply: now)."""
    reply = _reply.get()
    if reply is None or reply.sent:
        spawn(work, what=what)
    else:
        reply.waiting.append((work, what))


@contextmanager
def replying() -> Iterator[Callable[[], None]]:
    """The scope of one request. Call the function it gives once the reply is sent: the
    `after_reply` work waiting starts then, or when the block ends if it never was."""
    reply = _Reply()
    token = _reply.set(reply)
    try:
        yield reply.release
    finally:
        _reply.reset(token)
        reply.release()
