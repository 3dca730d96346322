"""Consolidate a micro-batch of pending turns: claim, score, extract, embed once,
reconcile, mark processed. One transaction, owned by the caller.

The steps that may use a model (importance, extraction, the reconcile decision) sit
behind two small seams: an `Analyzer` (local by default; LLM mode analyses a window of
a session's messages per model call, memwell/pipeline/llm_analysis.py) and a
reconcile `Decider`. Embedding happens once per batch, across every turn's
candidates: that is where batching pays.

A `deadline` bounds the model work. An analyzer stops starting windows once it has
passed; the turns it did not reach stay pending and come back in the report's
`deferred` (with every later turn of their user, so a user's turns still apply in
order), and the task hands them to a new task. A slow model means slow progress,
never none: the first window always runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy import func, tuple_, update
from sqlalchemy.orm import Session

from memwell.core.redaction import describe
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


@dataclass(frozen=True)
class TurnAnalysis:
    """One turn's importance and candidate memories."""

    importance: float
    candidates: list[Candidate]


@dataclass
class Analysis:
    """What an analyzer made of a batch. A turn in neither map was not reached before
    the deadline: it stays pending."""

    done: dict[str, TurnAnalysis] = field(default_factory=dict)
    #: turn id -> the error that made it fail (a poison turn, not the model's answer)
    failed: dict[str, str] = field(default_factory=dict)


class Analyzer(Protocol):
    """Importance and extraction for the turns of a batch, in order."""

    def analyze(self, turns: Sequence[TurnView], *, deadline: float | None) -> Analysis: ...


@dataclass(frozen=True)
class LocalAnalyzer:
    """Local mode: the heuristic scorer and sentence extraction."""

    threshold: float

    def importance(self, turn: TurnView) -> float:
        return round(score_turn(turn.content), 4)

    def extract(self, turn: TurnView, importance: float) -> list[Candidate]:
        return extract_local(turn, threshold=self.threshold)

    def analyze_one(self, analysis: Analysis, turn: TurnView) -> None:
        """Add `turn` to `analysis`, done or failed."""
        try:
            importance = self.importance(turn)
            analysis.done[turn.turn_id] = TurnAnalysis(importance, self.extract(turn, importance))
        except Exception as exc:  # a poison turn must not sink the batch with it
            log.exception("turn %s/%s failed analysis", turn.tenant, turn.turn_id)
            # Its kind, never its text: an exception's message may quote the turn.
            analysis.failed[turn.turn_id] = describe(exc)

    def analyze(self, turns: Sequence[TurnView], *, deadline: float | None) -> Analysis:
        analysis = Analysis()
        for turn in turns:
            self.analyze_one(analysis, turn)
        return analysis


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
    deadline: float | None = None,
    top_up: bool = True,
    held: list[tuple[str, str]] | None = None,
) -> ConsolidationReport:
    """Process up to `config.batch_size` pending turns (the given ones first; with
    `top_up` False, only the given ones' users). Turns already processed are skipped,
    so a rerun is a no-op. Model work stops at `deadline` (time.monotonic()); the turns
    it left come back as deferred. `held`, when given, receives (user, turn id) of each
    turn claimed as soon as it is claimed: a caller whose transaction then fails knows
    whose turns it held (memwell/pipeline/isolation.py)."""
    claim = claim_batch(
        session,
        tenant=tenant,
        turn_ids=turn_ids,
        limit=config.batch_size,
        linger_s=config.linger_s if top_up else 0.0,
        top_up=top_up,
    )
    turns = claim.turns
    if held is not None:
        held += [(t.user_id, t.id) for t in turns]
    if not turns:
        return ConsolidationReport(deferred=tuple(claim.deferred))
    analyzer = analyzer or LocalAnalyzer(threshold=config.extract_threshold)
    t0 = time.perf_counter()
    questions = questions_answered(session, tenant, turns)
    analysis = analyzer.analyze([view(t, questions.get(t.id)) for t in turns], deadline=deadline)
    turns, left = applicable(turns, analysis)
    candidates: list[Candidate] = []
    good: list[Turn] = []
    for turn in turns:
        if turn.id in analysis.failed:
            turn.status, turn.error = "failed", analysis.failed[turn.id]
            turn.attempts += 1
            continue
        done = analysis.done[turn.id]
        turn.importance = done.importance
        candidates += done.candidates
        good.append(turn)
    turns = good
    deferred = tuple(claim.deferred) + tuple(t.id for t in left)
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
        return ConsolidationReport(deferred=deferred)
    session.execute(
        update(Turn)
        .where(tuple_(Turn.tenant, Turn.id).in_([(t.tenant, t.id) for t in turns]))
        .values(status="processed", processed_at=func.now(), attempts=Turn.attempts + 1, error=None)
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
        deferred=deferred,
    )


def applicable(turns: Sequence[Turn], analysis: Analysis) -> tuple[list[Turn], list[Turn]]:
    """(the turns to apply now, the turns left pending). A turn the analysis did not
    reach is left, and so is every later turn of its user: a user's turns apply in
    order, or an old fact could supersede a newer one."""
    reached = analysis.done.keys() | analysis.failed.keys()
    cutoff: dict[str, int] = {}
    for t in turns:
        if t.id not in reached:
            cutoff[t.user_id] = min(cutoff.get(t.user_id, t.seq), t.seq)
    now = [t for t in turns if t.user_id not in cutoff or t.seq < cutoff[t.user_id]]
    later = [t for t in turns if t.user_id in cutoff and t.seq >= cutoff[t.user_id]]
    return now, later
