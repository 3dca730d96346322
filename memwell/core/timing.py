"""Per-stage timings of one request, in milliseconds, for the reply and the metrics."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class Stopwatch:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    async def timed(self, name: str, work: Awaitable[T]) -> T:
        started = time.perf_counter()
        result = await work
        self.lap(name, started)
        return result

    def lap(self, name: str, started: float) -> float:
        """Record the time since `started` under `name`; returns now, the next start."""
        now = time.perf_counter()
        self.timings[name] = round((now - started) * 1000, 3)
        return now
