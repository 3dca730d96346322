"""Edit one memory: correct its content, kind, importance or metadata; pin it; give it
an expiry. Every change is an `update` event with the old and new content.

A content change re-embeds the memory and runs the fact guard against the user's
nearest live memories: a paraphrase of another memory, or a conflicting fact, is
reported as a collision for the client to resolve. Nothing is merged behind its back.
A second live memory with exactly the same content cannot exist: that is a conflict
(for a store's keyed item, memwell/pipeline/store_keys.py: under the same key).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import insert, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memwell.core.errors import Conflict, InvalidInput, NotFound
from memwell.db.models import Memory, MemoryEvent
from memwell.embeddings.base import Embedder
from memwell.entities.extract import extract
from memwell.entities.restate import restate_entities
from memwell.entities.store import EntitySource
from memwell.intake.turns import AwareInstant, Content, Metadata
from memwell.memories.add import MemoryKind
from memwell.memories.record import MemoryRecord
from memwell.pipeline.dedup import fact_guard
from memwell.pipeline.store_keys import memory_hash

NEIGHBOURS = 5


class MemoryPatch(BaseModel):
    """Only the fields sent change; `"expires_at": null` clears an expiry."""

    model_config = ConfigDict(extra="forbid")

    content: Content | None = None
    kind: MemoryKind | None = None
    importance: float | None = Field(default=None, ge=0, le=1)
    metadata: Metadata | None = Field(default=None, description="Replaces the metadata.")
    pinned: bool | None = Field(default=None, strict=True)
    expires_at: AwareInstant | None = None


class Collision(BaseModel):
    """A live memory the new content comes close to."""

    memory_id: uuid.UUID
    content: str
    similarity: float
    relation: Literal["paraphrase", "conflicting fact"]
    reason: str


class EditResult(MemoryRecord):
    """The memory as it is now, and what its new content comes close to."""

    collisions: list[Collision] = Field(default_factory=list)


_NEAREST = text(
    """
    SELECT id, content, 1 - (embedding <=> CAST(:vec AS vector)) AS similarity
    FROM memories
    WHERE tenant = :tenant AND user_id = :user_id AND embedding_model = :model
      AND deleted_at IS NULL AND superseded_by IS NULL AND id <> :id
    ORDER BY embedding <=> CAST(:vec AS vector)
    LIMIT :k
    """
)


def _describe(changes: dict[str, Any]) -> str:
    def show(value: Any) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, datetime):
            return value.isoformat()
        return "none" if value is None else str(value)

    retention = {"pinned", "expires_at"}
    parts = [f"{k}={show(v)}" for k, v in changes.items() if k in retention]
    edited = sorted(k for k in changes if k not in retention)
    text_ = []
    if parts:
        text_.append("retention: " + ", ".join(parts))
    if edited:
        text_.append("edited: " + ", ".join(edited))
    return "; ".join(text_)


async def _collisions(
    session: AsyncSession, memory: Memory, vector: Any, model: str, threshold: float
) -> list[Collision]:
    vec = "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"
    rows = await session.execute(
        _NEAREST,
        {"vec": vec, "tenant": memory.tenant, "user_id": memory.user_id, "model": model,
         "id": memory.id, "k": NEIGHBOURS},
    )  # fmt: skip
    found = []
    for row in rows:
        if row.similarity < threshold:
            continue
        why = fact_guard(memory.content, row.content)
        found.append(
            Collision(
                memory_id=row.id,
                content=row.content,
                similarity=round(float(row.similarity), 4),
                relation="paraphrase" if why is None else "conflicting fact",
                reason=why or "would merge in consolidation",
            )
        )
    return found


async def update_memory(
    session: AsyncSession,
    *,
    tenant: str,
    memory_id: uuid.UUID,
    patch: MemoryPatch,
    embedder: Embedder | None,
    merge_threshold: float,
    entities: bool,
    user_id: str | None = None,
) -> EditResult:
    """Apply the patch to one live memory of the tenant (the caller commits). With
    `user_id` (a caller acting for one user, such as an agent), it must be theirs.
    With `entities`, a new text's entities and relations replace the old text's."""
    changes = {k: getattr(patch, k) for k in patch.model_fields_set}
    if not changes:
        raise InvalidInput(
            "set at least one of content, kind, importance, metadata, pinned, expires_at"
        )
    memory = await session.scalar(
        select(Memory)
        .where(Memory.tenant == tenant, Memory.id == memory_id, Memory.deleted_at.is_(None))
        .with_for_update()
    )
    if memory is None or (user_id is not None and memory.user_id != user_id):
        raise NotFound(f"memory {memory_id} not found")
    for name in ("kind", "importance", "content"):
        if name in changes and changes[name] is None:
            raise InvalidInput(f"{name} cannot be null")
    old_content = memory.content
    new_content = changes["content"].strip() if changes.get("content") else None
    if "metadata" in changes:
        memory.metadata_ = changes["metadata"] or {}
    vector = None
    if new_content is not None and new_content != old_content:
        vector = await _reembed(session, memory, new_content, embedder)
    elif memory_hash(memory.content, memory.metadata_) != memory.content_hash:
        # A store key given or taken away: the memory's dedup identity goes with it.
        await _rehash(session, memory, memory.content)
    for name in ("kind", "importance", "pinned", "expires_at"):
        if name in changes:
            setattr(memory, name, changes[name])
    memory.updated_at = datetime.now(UTC)
    collisions: list[Collision] = []
    if vector is not None and embedder is not None:
        collisions = await _collisions(
            session, memory, vector, embedder.model_name, merge_threshold
        )
    if vector is not None and entities:
        await session.run_sync(restate_entities, _entity_source(memory))
    await session.execute(
        insert(MemoryEvent).values(
            tenant=tenant, user_id=memory.user_id, memory_id=memory.id, event="update",
            old_content=old_content, new_content=memory.content,
            source_turn_ids=list(memory.source_turn_ids), reason=_describe(changes),
        )
    )  # fmt: skip
    await session.flush()
    await session.refresh(memory)
    return EditResult(**MemoryRecord.of(memory).model_dump(), collisions=collisions)


def _entity_source(memory: Memory) -> EntitySource:
    return EntitySource(
        tenant=memory.tenant,
        user_id=memory.user_id,
        memory_id=memory.id,
        event_time=memory.valid_from or memory.created_at,
        source_turn_ids=list(memory.source_turn_ids),
        extraction=extract(memory.content),
    )


async def _reembed(
    session: AsyncSession, memory: Memory, content: str, embedder: Embedder | None
) -> Any:
    if embedder is None:
        raise InvalidInput("this process cannot embed: content cannot be edited here")
    await _rehash(session, memory, content)
    vector = (await asyncio.to_thread(embedder.embed, [content]))[0]
    memory.content = content
    memory.embedding = vector
    memory.embedding_model = embedder.model_name
    return vector


async def _rehash(session: AsyncSession, memory: Memory, content: str) -> None:
    """Give the memory the dedup key of `content` and its metadata; a Conflict if
    another live memory of the user holds that key."""
    digest = memory_hash(content, memory.metadata_)
    twin = await session.scalar(
        select(Memory.id).where(
            Memory.tenant == memory.tenant, Memory.user_id == memory.user_id,
            Memory.content_hash == digest, Memory.id != memory.id,
            Memory.deleted_at.is_(None), Memory.superseded_by.is_(None),
        )
    )  # fmt: skip
    if twin is not None:
        raise Conflict(f"memory {twin} already holds this content")
    memory.content_hash = digest
