"""Read an export file (memwell/memories/export.py) back into the store.

The file is checked whole before anything is written, so a malformed line at the end
does not leave half an import behind; a line's error names its number. Live memories
are written through the direct add (memwell/memories/add.py) as given, not reconciled:
they were reconciled when first stored. Their fields, time stamps and provenance are
kept; the text is embedded again by the current model. Superseded and tombstoned
memories are history, not memory: they are counted and skipped. A memory without a
`source` in its metadata gets source "import"; one with a source keeps it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from pydantic import ValidationError
from sqlalchemy.orm import Session

from memwell.core.errors import InvalidInput
from memwell.embeddings.base import Embedder
from memwell.memories.add import MAX_BATCH, AddResult, NewMemory, add_memories_sync
from memwell.memories.export import EXPORT_FORMAT, EXPORT_VERSION, ExportedMemory, ExportHeader
from memwell.pipeline.reconcile import ReconcilePolicy

IMPORT_SOURCE: Final = "import"
MAX_SOURCE_CHARS: Final = 200  # NewMemory.source's limit
#: what the add takes over from an exported memory; the rest (strength, access
#: counts, ids) starts afresh
_KEPT: Final = {
    "content", "kind", "importance", "metadata", "session_id", "agent_id", "valid_from",
    "valid_to", "expires_at", "pinned", "source_turn_ids", "created_at",
}  # fmt: skip


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if line.strip():
                yield line_no, line


def _object(path: Path, line_no: int, line: str) -> dict[str, object]:
    try:
        raw = json.loads(line)
    except ValueError as exc:
        raise InvalidInput(f"{path}:{line_no}: not JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise InvalidInput(f"{path}:{line_no}: a line must be a JSON object")
    return raw


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "line"
    return f"{where}: {error['msg']}"


def read_header(path: Path) -> ExportHeader:
    """The file's header; InvalidInput when the file is not a Memwell export we read."""
    first = next(_lines(path), None)
    if first is None:
        raise InvalidInput(f"{path}: empty file, expected a {EXPORT_FORMAT} header")
    line_no, line = first
    raw = _object(path, line_no, line)
    if raw.get("format") != EXPORT_FORMAT:
        raise InvalidInput(f"{path}:{line_no}: not a {EXPORT_FORMAT} file (no header)")
    if raw.get("version") != EXPORT_VERSION:
        raise InvalidInput(
            f"{path}:{line_no}: export version {raw.get('version')!r} is not supported "
            f"(this Memwell reads version {EXPORT_VERSION})"
        )
    try:
        return ExportHeader.model_validate(raw)
    except ValidationError as exc:
        raise InvalidInput(f"{path}:{line_no}: bad header: {_first_error(exc)}") from exc


def as_new_memory(record: ExportedMemory) -> NewMemory:
    """The exported memory as the direct add takes it, provenance and times included."""
    source = record.metadata.get("source")
    if not (isinstance(source, str) and 0 < len(source) <= MAX_SOURCE_CHARS):
        source = IMPORT_SOURCE
    return NewMemory.model_validate({**record.model_dump(include=_KEPT), "source": source})


def read_memories(path: Path) -> Iterator[tuple[ExportedMemory, NewMemory | None]]:
    """Each memory line after the header, with what to add for it (None: not live)."""
    lines = _lines(path)
    next(lines, None)  # the header, read by read_header
    for line_no, line in lines:
        raw = _object(path, line_no, line)
        if raw.get("record") == "entity":
            continue  # derived from the memories: the add rebuilds them
        try:
            record = ExportedMemory.model_validate(raw)
            yield record, as_new_memory(record) if record.state == "live" else None
        except ValidationError as exc:
            raise InvalidInput(f"{path}:{line_no}: bad memory: {_first_error(exc)}") from exc


def check_file(path: Path) -> tuple[ExportHeader, int, int]:
    """Validate the whole file: (header, live memories, others); InvalidInput naming
    the first bad line, or when the file holds fewer or more lines than its header
    counts (a truncated copy)."""
    header = read_header(path)
    live = other = 0
    for _, new in read_memories(path):
        live, other = (live + 1, other) if new is not None else (live, other + 1)
    if live + other != header.count:
        raise InvalidInput(
            f"{path}: the header counts {header.count} memories, the file holds {live + other}"
        )
    return header, live, other


def restore_batch(
    session: Session,
    *,
    tenant: str,
    user_id: str,
    memories: Sequence[NewMemory],
    embedder: Embedder,
    policy: ReconcilePolicy,
) -> AddResult:
    """Add up to MAX_BATCH memories as given (the caller commits)."""
    if len(memories) > MAX_BATCH:
        raise InvalidInput(f"at most {MAX_BATCH} memories per batch")
    return add_memories_sync(
        session, tenant=tenant, user_id=user_id, memories=memories, embedder=embedder,
        reconcile=False, policy=policy,
    )  # fmt: skip
