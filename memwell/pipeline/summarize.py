"""Step 6: the session's running summary, folded incrementally from evicted turns.

The chat path appends to the Redis buffer; turns pushed out by its token budget are
sent here (by id). The new running summary is the old one plus those turns, kept
within `budget_tokens`. It is stored in sessions.summary (durable) and in the buffer's
summary key (what the chat path reads into its context). Turn ids already folded are
remembered in sessions.summarized_turn_ids, so a redelivered task changes nothing.

Local mode is extractive: each evicted turn contributes its best standalone
sentences (the extraction rules, speaker named, dates resolved); when over budget the
lowest-scoring sentences go first, and the rest keep their order. LLM mode asks the
model (memwell/pipeline/llm_steps.py).

`close_session` is for the idle-session job: it folds what is left, writes the
summary as a `summary` memory, and marks the session closed.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memwell.core.metrics import SUMMARY_TURNS_DROPPED_TOTAL
from memwell.core.tokens import count_tokens
from memwell.db.models import ChatSession, MemoryEvent, Turn
from memwell.embeddings import Embedder
from memwell.intake.dropped_turns import dropped_among
from memwell.memories.erasure import erasures_of
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.consolidate import view
from memwell.pipeline.extract import TurnView, extract_local
from memwell.pipeline.importance import score_text, split_sentences
from memwell.pipeline.writes import write_memory


class TurnsNotPersisted(Exception):
    """Evicted turns are not in Postgres yet (their ingest is in flight): retry later."""


class Summarizer(Protocol):
    def summarize(self, previous: str | None, turns: Sequence[TurnView]) -> str: ...


@dataclass(frozen=True)
class LocalSummarizer:
    """Extractive: best standalone sentences, lowest-scoring dropped when over budget."""

    budget_tokens: int = 300
    threshold: float = 0.35

    def summarize(self, previous: str | None, turns: Sequence[TurnView]) -> str:
        sentences = split_sentences(previous) if previous else []
        for turn in turns:
            sentences += [c.content for c in extract_local(turn, threshold=self.threshold)]
        kept = list(sentences)
        while kept and count_tokens(" ".join(kept)) > self.budget_tokens:
            kept.remove(min(kept, key=score_text))
        return " ".join(kept)


@dataclass(frozen=True)
class SummaryResult:
    summary: str | None
    folded: int
    #: named turns that were dropped (cleared, erased) and will never be stored: skipped
    dropped: int = 0


def _lock_session(session: Session, tenant: str, user_id: str, session_id: str) -> ChatSession:
    stmt = insert(ChatSession).values(tenant=tenant, user_id=user_id, id=session_id)
    session.execute(stmt.on_conflict_do_nothing(index_elements=["tenant", "user_id", "id"]))
    return session.scalars(
        select(ChatSession)
        .where(
            ChatSession.tenant == tenant,
            ChatSession.user_id == user_id,
            ChatSession.id == session_id,
        )
        .with_for_update()
    ).one()


def _erased_with_their_user(
    session: Session, tenant: str, user_id: str, turn_ids: list[str]
) -> set[str]:
    """Of `turn_ids`, those that are not stored because their user was erased: they
    never will be (a late one is dropped on its way in), so a request for them settles
    instead of retrying into a dead letter that would name the erased user."""
    if not turn_ids or user_id not in erasures_of(session, tenant, [user_id]):
        return set()
    stored = set(
        session.scalars(
            select(Turn.id).where(
                Turn.tenant == tenant, Turn.user_id == user_id, Turn.id.in_(turn_ids)
            )
        )
    )
    return {t for t in turn_ids if t not in stored}


def fold_into_summary(
    session: Session,
    summarizer: Summarizer,
    *,
    tenant: str,
    user_id: str,
    session_id: str,
    turn_ids: list[str],
) -> SummaryResult:
    """Fold these turns (skipping those already folded, and those dropped, on their way
    in or cleared once stored, which will never be stored) into the running summary.
    A turn neither stored nor dropped is still on its way: TurnsNotPersisted, retried."""
    asked = list(dict.fromkeys(turn_ids))
    dropped = dropped_among(session, tenant=tenant, turn_ids=asked)
    dropped |= _erased_with_their_user(
        session, tenant, user_id, [t for t in asked if t not in dropped]
    )
    if dropped:
        SUMMARY_TURNS_DROPPED_TOTAL.inc(len(dropped))
    if asked and len(dropped) == len(asked):
        # All dropped (their session cleared, their user erased): nothing to fold, and
        # no row to make.
        return SummaryResult(summary=None, folded=0, dropped=len(dropped))
    chat = _lock_session(session, tenant, user_id, session_id)
    done = set(chat.summarized_turn_ids or []) | dropped
    wanted = [t for t in asked if t not in done]
    if not wanted:
        return SummaryResult(summary=chat.summary, folded=0, dropped=len(dropped))
    turns = session.scalars(
        select(Turn)
        .where(Turn.tenant == tenant, Turn.user_id == user_id, Turn.id.in_(wanted))
        .order_by(Turn.created_at, Turn.received_at)
    ).all()
    if len(turns) < len(wanted):
        raise TurnsNotPersisted(f"{len(wanted) - len(turns)} of {len(wanted)} turns not stored")
    chat.summary = summarizer.summarize(chat.summary, [view(t) for t in turns]) or chat.summary
    chat.summarized_turn_ids = [*(chat.summarized_turn_ids or []), *wanted]
    chat.summary_updated_at = datetime.now(UTC)
    session.flush()
    return SummaryResult(summary=chat.summary, folded=len(wanted), dropped=len(dropped))


def close_session(
    session: Session,
    embedder: Embedder,
    summarizer: Summarizer,
    *,
    tenant: str,
    user_id: str,
    session_id: str,
) -> uuid.UUID | None:
    """Fold the session's remaining turns, store the summary as a `summary` memory and
    mark the session closed. Returns the memory id (None when there is nothing to
    summarise). Safe to run twice: the memory dedups on its content."""
    chat = _lock_session(session, tenant, user_id, session_id)
    done = set(chat.summarized_turn_ids or [])
    rest = session.scalars(
        select(Turn.id).where(
            Turn.tenant == tenant, Turn.user_id == user_id, Turn.session_id == session_id
        )
    ).all()
    remaining = [t for t in rest if t not in done]
    result = fold_into_summary(
        session, summarizer, tenant=tenant, user_id=user_id, session_id=session_id,
        turn_ids=remaining,
    )  # fmt: skip
    chat.status = "closed"
    chat.closed_at = chat.closed_at or datetime.now(UTC)
    if not result.summary:
        return None
    sources = _summary_sources(session, tenant, result.summary, chat.summarized_turn_ids)
    last_turn = session.scalar(
        select(func.max(Turn.created_at)).where(
            Turn.tenant == tenant, Turn.user_id == user_id, Turn.session_id == session_id
        )
    )
    candidate = Candidate(
        tenant=tenant,
        user_id=user_id,
        session_id=session_id,
        kind="summary",
        content=result.summary,
        importance=0.6,
        event_time=last_turn or datetime.now(UTC),
        source_turn_ids=sources,
        metadata={"session_summary": True},
    )
    vector = embedder.embed([result.summary])[0]
    memory_id, added = write_memory(session, candidate, vector, embedder.model_name)
    session.add(
        MemoryEvent(
            tenant=tenant,
            user_id=user_id,
            memory_id=memory_id,
            event="add" if added else "reinforce",
            new_content=result.summary,
            source_turn_ids=sources,
            reason="session closed",
        )
    )
    return memory_id


def _summary_sources(
    session: Session, tenant: str, summary: str, folded: Sequence[str]
) -> list[str]:
    """Provenance: the folded turns whose extracted sentences made it into the summary
    (an LLM summary matches none of them verbatim: then every folded turn)."""
    turns = session.scalars(select(Turn).where(Turn.tenant == tenant, Turn.id.in_(folded))).all()
    cited = [
        t.id
        for t in turns
        if any(c.content in summary for c in extract_local(view(t), threshold=0.0))
    ]
    return cited or list(folded)
