"""Consolidate a micro-batch of pending turns: claim, score, extract, embed once,
reconcile, mark processed. One transaction, owned by the caller.

The steps that may use a model (importance, extraction, the reconcile decision) sit
behind two small seams: an `Analyzer` (local by default, LLM mode in
memwell/pipeline/llm_steps.py) and a reconcile `Decider`. Embedding happens once
per batch, across every turn's candidates: that is where batching pays.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import func, tuple_, update
from sqlalchemy.orm import Session

from memwell.core.settings import Settings
from memwell.db.models import Turn
from memwell.embeddings import Embedder
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.claim import claim_batch
from memwell.pipeline.extract import Question, TurnView, extract_local
from memwell.pipeline.importance import score_turn
from memwell.pipeline.reconcile import Decider, ReconcilePolicy, reconcile_batch
from memwell.pipeline.replies import questions_answered

log = logging.getLogger(__name__)


class Analyzer(Protocol):
    """Importance and extraction for one turn."""

    def importance(self, turn: TurnView) -> float: ...

    def extract(self, turn: TurnView, importance: float) -> list[Candidate]: ...


@dataclass(frozen=True)
class LocalAnalyzer:
    """Local mode: the heuristic scorer and sentence extraction."""

    threshold: float

    def importance(self, turn: TurnView) -> float:
        return round(score_turn(turn.content), 4)

    def extract(self, turn: TurnView, importance: float) -> list[Candidate]:
        return extract_local(turn, threshold=self.threshold)


@dataclass(frozen=True)
class ConsolidationConfig:
    batch_size: int = 64
    linger_s: float = 0.025
    extract_threshold: float = 0.15
    policy: ReconcilePolicy = ReconcilePolicy()

    @classmethod
    def from_settings(cls, settings: Settings) -> ConsolidationConfig:
        return cls(
            batch_size=settings.embedding_batch_size,
            linger_s=settings.embed_linger_ms / 1000.0,
            extract_threshold=settings.extract_threshold,
            policy=ReconcilePolicy(
                merge_threshold=settings.merge_threshold,
                supersede_floor=settings.supersede_floor,
                neighbours=settings.reconcile_neighbours,
                entities=settings.entities_enabled,
            ),
        )


@dataclass(frozen=True)
class ConsolidationReport:
    turns: int = 0
    candidates: int = 0
    memories_added: int = 0
    memories_reinforced: int = 0
    memories_merged: int = 0
    memories_superseded: int = 0
    analyze_ms: float = 0.0
    embed_ms: float = 0.0
    reconcile_ms: float = 0.0
    #: users in the batch (each claimed whole, memwell/pipeline/claim.py)
    users: int = 0
    #: time spent taking the users' locks in reconcile (held since the claim: ~0)
    lock_wait_ms: float = 0.0
    #: the task's own turns still pending (their user was busy): claim again for them
    deferred: tuple[str, ...] = ()


def view(turn: Turn, replying_to: Question | None = None) -> TurnView:
    return TurnView(
        tenant=turn.tenant,
        turn_id=turn.id,
        user_id=turn.user_id,
        session_id=turn.session_id,
        role=turn.role,
        content=turn.content,
        created_at=turn.created_at,
        metadata=dict(turn.metadata_ or {}),
        replying_to=replying_to,
    )


def consolidate_pending(
    session: Session,
    embedder: Embedder,
    *,
    tenant: str,
    turn_ids: list[str],
    config: ConsolidationConfig,
    analyzer: Analyzer | None = None,
    decider: Decider | None = None,
) -> ConsolidationReport:
    """Process up to `config.batch_size` pending turns (the given ones first). Turns
    already processed are skipped, so a rerun is a no-op."""
    claim = claim_batch(
        session,
        tenant=tenant,
        turn_ids=turn_ids,
        limit=config.batch_size,
        linger_s=config.linger_s,
    )
    turns = claim.turns
    if not turns:
        return ConsolidationReport(deferred=tuple(claim.deferred))
    analyzer = analyzer or LocalAnalyzer(threshold=config.extract_threshold)
    t0 = time.perf_counter()
    candidates: list[Candidate] = []
    good: list[Turn] = []
    questions = questions_answered(session, tenant, turns)
    for turn in turns:
        try:
            tv = view(turn, questions.get(turn.id))
            turn.importance = analyzer.importance(tv)
            candidates += analyzer.extract(tv, turn.importance)
            good.append(turn)
        except Exception as exc:  # a poison turn must not sink the batch with it
            log.exception("turn %s/%s failed analysis", turn.tenant, turn.id)
            turn.status, turn.error = "failed", f"{type(exc).__name__}: {exc}"[:2000]
            turn.attempts += 1
    turns = good
    t1 = time.perf_counter()
    vectors = embedder.embed([c.content for c in candidates])
    t2 = time.perf_counter()
    result = reconcile_batch(
        session,
        candidates,
        vectors,
        embedding_model=embedder.model_name,
        policy=config.policy,
        decider=decider,
    )
    session.flush()  # the importance (and failure) values set on the ORM rows above
    if not turns:
        return ConsolidationReport(deferred=tuple(claim.deferred))
    session.execute(
        update(Turn)
        .where(tuple_(Turn.tenant, Turn.id).in_([(t.tenant, t.id) for t in turns]))
        .values(status="processed", processed_at=func.now(), attempts=Turn.attempts + 1)
    )
    t3 = time.perf_counter()
    return ConsolidationReport(
        turns=len(turns),
        candidates=len(candidates),
        memories_added=result.added,
        memories_reinforced=result.reinforced,
        memories_merged=result.merged,
        memories_superseded=result.superseded,
        analyze_ms=round((t1 - t0) * 1000, 2),
        embed_ms=round((t2 - t1) * 1000, 2),
        reconcile_ms=round((t3 - t2) * 1000, 2),
        users=len(claim.users),
        lock_wait_ms=round(result.lock_wait_ms, 2),
        deferred=tuple(claim.deferred),
    )
