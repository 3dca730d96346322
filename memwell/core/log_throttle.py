"""Log lines that repeat: at most one per kind per interval, with a count of the rest.

A flood of identical failures (a producer pushing thousands of poison items, a database
refusing every dead letter) wrote one error line each: the log grew with the flood and
buried everything else in it. A `LogThrottle` writes the first line of a kind at once;
repeats within the interval are counted, not written, and the next line of that kind
after the interval says how many were left out. The count also lives where an operator
looks (metrics, `memwell status`), so nothing is hidden, only not repeated.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable

#: Kinds remembered at most; past it the oldest is forgotten (its next line is written).
MAX_KINDS = 256


class LogThrottle:
    """One logger's lines, at most one per kind per `interval_s` (thread-safe)."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self._clock = clock
        #: kind -> (when its last line was written, repeats left out since)
        self._kinds: dict[Hashable, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def log(
        self, level: int, kind: Hashable, msg: str, *args: object, exc_info: bool = False
    ) -> bool:
        """Write `msg % args` unless a line of `kind` was written within the interval
        (then count it); whether it was written."""
        now = self._clock()
        with self._lock:
            last = self._kinds.get(kind)
            if last is not None and now - last[0] < self.interval_s:
                self._kinds[kind] = (last[0], last[1] + 1)
                return False
            if last is None and len(self._kinds) >= MAX_KINDS:
                del self._kinds[next(iter(self._kinds))]
            self._kinds.pop(kind, None)  # re-inserted last: the oldest stay first
            self._kinds[kind] = (now, 0)
        if last is not None and last[1]:
            msg += " (%d more like it in the last %.0f s, not logged)"
            args = (*args, last[1], now - last[0])
        self.logger.log(level, msg, *args, exc_info=exc_info, stacklevel=2)
        return True
