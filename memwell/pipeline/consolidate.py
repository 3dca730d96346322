"""Consolidate a batch of pending turns: claim, extract, embed once, store, mark."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, tuple_, update
from sqlalchemy.orm import Session

from memwell.db.models import Turn
from memwell.embeddings import Embedder
from memwell.pipeline.claim import claim_pending
from memwell.pipeline.extract import candidates_from_turn
from memwell.pipeline.memories import store_candidates


@dataclass(frozen=True)
class ConsolidationReport:
    turns: int
    memories_added: int
    memories_reinforced: int


def consolidate_pending(
    session: Session, embedder: Embedder, *, tenant: str, turn_ids: list[str], limit: int
) -> ConsolidationReport:
    """Process up to `limit` pending turns (the given ones first) in one transaction
    owned by the caller. Turns already processed are skipped, so a rerun is a no-op."""
    turns = claim_pending(session, tenant=tenant, turn_ids=turn_ids, limit=limit)
    if not turns:
        return ConsolidationReport(turns=0, memories_added=0, memories_reinforced=0)
    candidates = [c for t in turns for c in candidates_from_turn(t)]
    vectors = embedder.embed([c.content for c in candidates])
    results = store_candidates(session, candidates, vectors, embedding_model=embedder.model_name)
    session.execute(
        update(Turn)
        .where(tuple_(Turn.tenant, Turn.id).in_([(t.tenant, t.id) for t in turns]))
        .values(status="processed", processed_at=func.now(), attempts=Turn.attempts + 1)
    )
    added = sum(r.added for r in results)
    return ConsolidationReport(
        turns=len(turns), memories_added=added, memories_reinforced=len(results) - added
    )
