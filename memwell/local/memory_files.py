"""`memwell export` and `memwell import --format memwell`: a user's memories to a JSON
Lines file and back (the format: memwell/memories/export.py).

Standard output carries only the file, so `memwell export ... > file.jsonl` is clean;
progress bars and summaries go to standard error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy.orm import Session, sessionmaker

from memwell.core import stack
from memwell.core.settings import Settings
from memwell.db.engine import make_engine
from memwell.db.tenancy import make_tenant_sessionmaker, tenant_transaction
from memwell.embeddings import build_embedder
from memwell.embeddings.base import Embedder
from memwell.memories.add import MAX_BATCH, NewMemory
from memwell.memories.export import ExportHeader, export_batches, export_entities, export_header
from memwell.memories.restore import check_file, read_memories, restore_batch
from memwell.pipeline.consolidate import ConsolidationConfig
from memwell.pipeline.reconcile import ReconcilePolicy


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description:<9}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def run_export(
    sessions: sessionmaker[Session],
    *,
    tenant: str,
    user_id: str,
    include_superseded: bool,
    out: TextIO,
    console: Console,
) -> ExportHeader:
    """Write the header and every memory line to `out`, in one transaction (run it at
    REPEATABLE READ: then the header's count is exactly the lines written)."""
    with tenant_transaction(sessions, tenant) as session, _progress(console) as progress:
        header = export_header(
            session, tenant=tenant, user_id=user_id, include_superseded=include_superseded
        )
        out.write(header.model_dump_json() + "\n")
        bar = progress.add_task("exported", total=header.count)
        for batch in export_batches(
            session, tenant=tenant, user_id=user_id, include_superseded=include_superseded
        ):
            out.writelines(m.model_dump_json() + "\n" for m in batch)
            progress.update(bar, advance=len(batch))
        for entities in export_entities(session, tenant=tenant, user_id=user_id):
            out.writelines(e.model_dump_json() + "\n" for e in entities)
    out.flush()
    return header


@dataclass(frozen=True)
class MemoryImportSummary:
    path: Path
    header: ExportHeader
    tenant: str
    user_id: str
    added: int
    reinforced: int
    skipped: int
    embedding_model: str
    seconds: float

    def render(self) -> str:
        h = self.header
        return "\n".join(
            [
                f"file           {self.path}  ({h.count} memories of {h.tenant}/{h.user_id}, "
                f"exported {h.exported_at:%Y-%m-%d %H:%M})",
                f"into           {self.tenant}/{self.user_id}",
                f"added          {self.added}",
                f"reinforced     {self.reinforced}  (the same text was already live)",
                f"skipped        {self.skipped}  (superseded or deleted: history only)",
                f"embedded with  {self.embedding_model}",
                f"time           {self.seconds:.1f} s",
            ]
        )


def run_memory_import(
    path: Path,
    *,
    sessions: sessionmaker[Session],
    tenant: str | None,
    user_id: str | None,
    embedder: Embedder,
    policy: ReconcilePolicy,
    console: Console,
    batch_size: int = MAX_BATCH,
) -> MemoryImportSummary:
    """Check the whole file, then add its live memories in batches of at most
    MAX_BATCH, one transaction each. `tenant` and `user_id` default to the file's."""
    started = time.monotonic()
    header, live, skipped = check_file(path)
    tenant, user_id = tenant or header.tenant, user_id or header.user_id
    size = max(1, min(batch_size, MAX_BATCH))
    counts = {"added": 0, "reinforced": 0}

    def flush(batch: list[NewMemory]) -> None:
        with tenant_transaction(sessions, tenant) as session:
            result = restore_batch(
                session, tenant=tenant, user_id=user_id, memories=batch, embedder=embedder,
                policy=policy,
            )  # fmt: skip
        for r in result.results:
            counts[r.action] = counts.get(r.action, 0) + 1

    with _progress(console) as progress:
        bar = progress.add_task("imported", total=live)
        batch: list[NewMemory] = []
        for _, new in read_memories(path):
            if new is not None:
                batch.append(new)
            if len(batch) == size:
                flush(batch)
                progress.update(bar, advance=len(batch))
                batch = []
        if batch:
            flush(batch)
            progress.update(bar, advance=len(batch))
    return MemoryImportSummary(
        path=path, header=header, tenant=tenant, user_id=user_id, added=counts["added"],
        reinforced=counts["reinforced"], skipped=skipped, embedding_model=embedder.model_name,
        seconds=time.monotonic() - started,
    )  # fmt: skip


def export_file(
    settings: Settings, out: TextIO, *, tenant: str, user_id: str, include_superseded: bool
) -> ExportHeader:
    """`memwell export`: the stack's database, progress on standard error."""
    engine = make_engine(stack.database_url(settings), pool_size=1)
    # One snapshot for the count in the header and every line after it.
    snapshot = engine.execution_options(isolation_level="REPEATABLE READ")
    try:
        return run_export(
            make_tenant_sessionmaker(snapshot), tenant=tenant, user_id=user_id,
            include_superseded=include_superseded, out=out, console=Console(stderr=True),
        )  # fmt: skip
    finally:
        engine.dispose()


def import_file(
    settings: Settings,
    path: Path,
    *,
    tenant: str | None,
    user_id: str | None,
    batch_size: int | None,
) -> MemoryImportSummary:
    """`memwell import --format memwell`: the stack's database and embedding model."""
    engine = make_engine(stack.database_url(settings), pool_size=1)
    try:
        return run_memory_import(
            path, sessions=make_tenant_sessionmaker(engine), tenant=tenant, user_id=user_id,
            embedder=build_embedder(settings),
            policy=ConsolidationConfig.from_settings(settings).policy,
            console=Console(stderr=True), batch_size=batch_size or MAX_BATCH,
        )  # fmt: skip
    finally:
        engine.dispose()
