"""`memwell import FILE`: enqueue a file of turns in batches, follow the backlog as the
workers consolidate it, and summarise.

Two progress bars: turns enqueued, and turns consolidated (polled from the database
in bulk, one grouped count per poll). Turns already stored are not sent again, so a
re-run of the same file only waits for whatever is still pending.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy.orm import Session, sessionmaker

from memwell.intake.enqueue import enqueue_turns
from memwell.intake.import_progress import (
    analyze_searched_tables,
    count_memories,
    status_counts,
    stored_ids,
)
from memwell.intake.turns import TurnIn

DONE = ("processed", "failed", "dropped")
PLAIN_PROGRESS_EVERY_S = 15.0


@dataclass(frozen=True)
class ImportSummary:
    turns: int
    already_stored: int
    enqueued: int
    consolidated: int
    consolidated_before: int
    failed: int
    pending: int
    users: int
    memories_before: int
    memories_after: int
    seconds: float
    #: the searched tables' planner statistics were refreshed (the import added memories)
    analyzed: bool = False

    @property
    def new_memories(self) -> int:
        return self.memories_after - self.memories_before

    @property
    def throughput(self) -> float:
        """Turns consolidated by this run, per second of the whole run."""
        fresh = self.consolidated - self.consolidated_before
        return fresh / self.seconds if self.seconds > 0 else 0.0

    def render(self) -> str:
        return "\n".join(
            [
                f"turns          {self.turns}  ({self.enqueued} enqueued, "
                f"{self.already_stored} already stored)",
                f"consolidated   {self.consolidated}  (failed {self.failed}, "
                f"still pending {self.pending})",
                f"users          {self.users}",
                f"memories       {self.memories_after}  (+{self.new_memories} this run)",
                f"time           {self.seconds:.1f} s",
                *(["statistics     refreshed for search (ANALYZE)"] if self.analyzed else []),
                f"throughput     {self.throughput:.1f} turns/s consolidated",
            ]
        )


def run_import(
    turns: Sequence[TurnIn],
    *,
    tenant: str,
    sessions: sessionmaker[Session],
    broker_url: str,
    batch_size: int = 100,
    wait: bool = True,
    timeout_s: float = 3600.0,
    poll_s: float = 0.5,
    console: Console | None = None,
    send: Callable[..., list[str]] = enqueue_turns,
) -> ImportSummary:
    """Enqueue `turns` not stored yet, then (with `wait`) follow them to the end."""
    started = time.monotonic()
    ids = [t.id for t in turns]
    users = sorted({t.user_id for t in turns})
    with sessions() as session:
        present = stored_ids(session, tenant=tenant, turn_ids=ids)
        memories_before = count_memories(session, tenant=tenant, users=users)
    todo = [t for t in turns if t.id not in present]

    def done_count() -> dict[str, int]:
        with sessions() as session:
            return status_counts(session, tenant=tenant, turn_ids=ids)

    progress = Progress(
        TextColumn("{task.description:<13}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    with progress:
        enqueued_bar = progress.add_task("enqueued", total=len(todo))
        done_bar = progress.add_task("consolidated", total=len(ids))
        counts = done_count()
        consolidated_before = counts.get("processed", 0)
        for start in range(0, len(todo), batch_size):
            batch = todo[start : start + batch_size]
            send(batch, tenant=tenant, broker_url=broker_url, chunk_size=batch_size)
            progress.update(enqueued_bar, advance=len(batch))
            if (start // batch_size) % 10 == 0:  # keep the second bar moving, cheaply
                counts = done_count()
                progress.update(done_bar, completed=sum(counts.get(s, 0) for s in DONE))
        deadline = time.monotonic() + timeout_s
        next_line = time.monotonic()
        while wait:
            counts = done_count()
            finished = sum(counts.get(s, 0) for s in DONE)
            progress.update(done_bar, completed=finished)
            if finished >= len(ids) or time.monotonic() > deadline:
                break
            if not progress.console.is_terminal and time.monotonic() >= next_line:
                # Bars do not redraw into a log file or a pipe: leave a line now and then.
                progress.console.print(
                    f"consolidated {finished}/{len(ids)} after {time.monotonic() - started:.0f} s"
                )
                next_line = time.monotonic() + PLAIN_PROGRESS_EVERY_S
            time.sleep(poll_s)
    with sessions() as session:
        memories_after = count_memories(session, tenant=tenant, users=users)
        # Without waiting, most memories are still to come: autovacuum will see them.
        analyzed = wait and memories_after != memories_before
        if analyzed:
            analyze_searched_tables(session)
    return ImportSummary(
        turns=len(ids),
        already_stored=len(present),
        enqueued=len(todo),
        consolidated=counts.get("processed", 0),
        consolidated_before=consolidated_before,
        failed=counts.get("failed", 0) + counts.get("dropped", 0),
        pending=len(ids) - sum(counts.get(s, 0) for s in DONE),
        users=len(users),
        memories_before=memories_before,
        memories_after=memories_after,
        seconds=time.monotonic() - started,
        analyzed=analyzed,
    )


def load(path: Path, fmt: str) -> list[TurnIn]:
    from memwell.intake.importers import READERS

    return READERS[fmt](path)
