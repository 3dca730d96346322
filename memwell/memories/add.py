"""Add memories directly: a fact an agent learned from a tool, a profile imported from a
CRM, an export read back. No chat turn to fake and no consolidation to wait for.

With `reconcile` (the default) each memory goes through the same dedup, merge and
supersede as consolidation (memwell/pipeline/reconcile.py, its local rule), and the
result says what happened to each. Without it, memories are stored as given; an exact
duplicate of a live memory still reinforces it, since a user has one live memory per
normalised content. Memories are embedded before the call returns, so they are
searchable at once; the history records the `add` with its source.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from memwell.db.models import MemoryEvent
from memwell.embeddings.base import Embedder
from memwell.intake.turns import AwareInstant, Content, Identifier, Metadata
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.importance import score_text
from memwell.pipeline.reconcile import Outcome, ReconcilePolicy, reconcile_batch
from memwell.pipeline.user_lock import lock_users
from memwell.pipeline.writes import write_memories

MemoryKind = Literal["fact", "preference", "event", "summary", "episode"]
MAX_BATCH = 500
_PAST = {"add": "added", "reinforce": "reinforced", "merge": "merged", "supersede": "superseded"}


class NewMemory(BaseModel):
    """One memory to store, as the client states it."""

    model_config = ConfigDict(extra="forbid")

    content: Content
    kind: MemoryKind = "fact"
    importance: float | None = Field(
        default=None, ge=0, le=1, description="None: scored like a consolidated turn."
    )
    metadata: Metadata = Field(default_factory=dict)
    session_id: Identifier | None = None
    agent_id: Identifier | None = None
    valid_from: AwareInstant | None = Field(default=None, description="Default: now.")
    valid_to: AwareInstant | None = None
    expires_at: AwareInstant | None = None
    pinned: bool = Field(default=False, strict=True)
    source: Identifier | None = Field(
        default=None, description="Where it came from, e.g. 'crm-import'."
    )
    source_turn_ids: list[Identifier] = Field(
        default_factory=list,
        max_length=1000,
        description="Provenance: the turns it came from (an import keeps them).",
    )
    created_at: AwareInstant | None = Field(
        default=None, description="Default: now (an import keeps the original)."
    )

    @model_validator(mode="after")
    def _validity_in_order(self) -> NewMemory:
        if self.valid_from and self.valid_to and self.valid_to <= self.valid_from:
            raise ValueError("valid_to must be after valid_from")
        return self


class AddedMemory(BaseModel):
    """What became of one memory of the request."""

    action: Literal["added", "reinforced", "merged", "superseded"]
    #: the memory that now holds it
    memory_id: uuid.UUID
    #: merged: the memory it merged into; superseded: the memory it replaced
    related_memory_id: uuid.UUID | None = None


class AddResult(BaseModel):
    results: list[AddedMemory]
    embedding_model: str


def _candidate(tenant: str, user_id: str, m: NewMemory, now: datetime) -> Candidate:
    metadata = {**m.metadata, **({"source": m.source} if m.source else {})}
    return Candidate(
        tenant=tenant,
        user_id=user_id,
        session_id=m.session_id,
        kind=m.kind,
        content=m.content.strip(),
        importance=m.importance if m.importance is not None else score_text(m.content),
        event_time=m.created_at or m.valid_from or now,
        source_turn_ids=list(m.source_turn_ids),
        agent_id=m.agent_id,
        metadata=metadata,
        pinned=m.pinned,
        expires_at=m.expires_at,
        valid_from=m.valid_from,
        valid_to=m.valid_to,
        origin=f"added directly ({m.source})" if m.source else "added directly",
    )


def _candidates(tenant: str, user_id: str, memories: Sequence[NewMemory]) -> list[Candidate]:
    now = datetime.now(UTC)  # one instant for the whole request
    return [_candidate(tenant, user_id, m, now) for m in memories]


def _store(
    session: Session,
    candidates: Sequence[Candidate],
    vectors: Any,
    *,
    model: str,
    reconcile: bool,
    policy: ReconcilePolicy,
) -> list[Outcome]:
    if reconcile:
        return reconcile_batch(
            session, candidates, vectors, embedding_model=model, policy=policy
        ).outcomes
    lock_users(session, {(c.tenant, c.user_id) for c in candidates})
    written = write_memories(session, candidates, vectors, model, entities=policy.entities)
    session.execute(
        insert(MemoryEvent),
        [
            {
                "tenant": c.tenant, "user_id": c.user_id, "memory_id": memory_id,
                "event": "add" if added else "reinforce", "new_content": c.content,
                "source_turn_ids": c.source_turn_ids, "reason": c.origin,
            }
            for c, (memory_id, added) in zip(candidates, written, strict=True)
        ],
    )  # fmt: skip
    return [Outcome("add" if added else "reinforce", memory_id) for memory_id, added in written]


def _result(outcomes: Sequence[Outcome], model: str) -> AddResult:
    return AddResult(
        results=[
            AddedMemory(
                action=_PAST[o.action],
                memory_id=o.memory_id,
                related_memory_id=o.related_id if o.action in ("merge", "supersede") else None,
            )
            for o in outcomes
        ],
        embedding_model=model,
    )


async def add_memories(
    session: AsyncSession,
    *,
    tenant: str,
    user_id: str,
    memories: Sequence[NewMemory],
    embedder: Embedder,
    reconcile: bool,
    policy: ReconcilePolicy,
) -> AddResult:
    """Embed and store the memories (the caller commits); what happened to each."""
    candidates = _candidates(tenant, user_id, memories)
    # Embedding is CPU work (or a network call): off the event loop.
    vectors = await asyncio.to_thread(embedder.embed, [c.content for c in candidates])
    model = embedder.model_name
    outcomes = await session.run_sync(
        lambda s: _store(s, candidates, vectors, model=model, reconcile=reconcile, policy=policy)
    )
    return _result(outcomes, model)


def add_memories_sync(
    session: Session,
    *,
    tenant: str,
    user_id: str,
    memories: Sequence[NewMemory],
    embedder: Embedder,
    reconcile: bool,
    policy: ReconcilePolicy,
) -> AddResult:
    """The same, for the command line's import."""
    candidates = _candidates(tenant, user_id, memories)
    vectors = embedder.embed([c.content for c in candidates])
    outcomes = _store(
        session, candidates, vectors, model=embedder.model_name, reconcile=reconcile, policy=policy
    )
    return _result(outcomes, embedder.model_name)
