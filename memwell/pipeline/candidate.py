"""A candidate memory: what extraction, summaries and direct adds hand to the writer.

Every memory row is written from a Candidate by memwell/pipeline/writes.py: an exact
duplicate (same normalised content for the same user) reinforces the live memory
instead of adding a row. Near duplicates and changed facts are
memwell/pipeline/reconcile.py's job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memwell.entities.extract import Extraction


@dataclass(frozen=True)
class Candidate:
    """A memory about to be stored."""

    tenant: str
    user_id: str
    session_id: str | None
    kind: str
    content: str
    importance: float
    event_time: datetime
    source_turn_ids: list[str]
    agent_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # Set by a client adding a memory directly; consolidation leaves the defaults.
    pinned: bool = False
    expires_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    #: why it was written (recorded in its history when the decision gives no reason)
    origin: str | None = None
    #: what the text mentions, when the extraction step said (LLM mode); None: the
    #: writer runs the local extractor on the stored text
    entities: Extraction | None = None
