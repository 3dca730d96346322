"""Progress of a long benchmark step, on stderr, fit for wherever stderr goes.

On a terminal it is a live bar (rich.progress), redrawn in place. Anywhere else (a log
file, a pipe, CI) a redrawn line cannot be redrawn: the hand-drawn `\\r` lines the
benchmarks used became one line per update, thousands in a log. There a plain line is
written at most once every `every_s` seconds, and once at the end, with the same
numbers. Every benchmark shows progress through `progress()`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import IO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.progress import Progress as RichProgress

#: Seconds between two plain lines when stderr is not a terminal.
EVERY_S = 30.0


class Progress:
    """One step's progress: `update(done)` as it goes, `close()` at the end (or use it
    as a context manager). `note` is free text shown after the count."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        every_s: float = EVERY_S,
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = total
        self.every_s = every_s
        self.done = 0
        self.note = ""
        self._stream = stream or sys.stderr
        self._clock = clock
        self._started = self._last_line = clock()
        self._closed = False
        console = Console(file=self._stream)
        self._live: RichProgress | None = None
        self._task: TaskID | None = None
        if console.is_terminal and not console.is_dumb_terminal:
            self._live = RichProgress(
                TextColumn("  {task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[note]}"),
                TimeElapsedColumn(),
                console=console,
            )
            self._task = self._live.add_task(label, total=total, note="")
            self._live.start()

    @property
    def live(self) -> bool:
        """Whether it draws a live bar (stderr is a terminal)."""
        return self._live is not None

    def update(self, done: int, note: str = "") -> None:
        """`done` of the total so far; on a file, a line if `every_s` passed since the
        last one."""
        self.done, self.note = done, note
        if self._live is not None and self._task is not None:
            self._live.update(self._task, completed=done, note=note)
            return
        now = self._clock()
        if now - self._last_line >= self.every_s:
            self._line(now)

    def advance(self, n: int = 1, note: str = "") -> None:
        self.update(self.done + n, note or self.note)

    def close(self, note: str | None = None) -> None:
        """The last state, once: the bar left in place, or a final line."""
        if self._closed:
            return
        self._closed = True
        if note is not None:
            self.note = note
        if self._live is not None and self._task is not None:
            self._live.update(self._task, completed=self.done, note=self.note)
            self._live.stop()
            return
        self._line(self._clock())

    def _line(self, now: float) -> None:
        self._last_line = now
        count = f"{self.done:,}" if self.total is None else f"{self.done:,}/{self.total:,}"
        note = f" {self.note}" if self.note else ""
        print(
            f"  {self.label}: {count}{note} ({now - self._started:.0f} s)",
            file=self._stream,
            flush=True,
        )

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def progress(label: str, total: int | None = None, *, every_s: float = EVERY_S) -> Progress:
    """A step's progress on stderr (see the module doc)."""
    return Progress(label, total, every_s=every_s)
