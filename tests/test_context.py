"""Context assembly: budget trimming order and quoting (plain functions, no services)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from memwell.buffer import BufferedTurn
from memwell.context import assemble_context, quote
from memwell.retrieval import MemoryHit
from memwell.tokens import count_tokens


def _hit(content: str, score: float) -> MemoryHit:
    return MemoryHit(
        id=uuid.uuid4(), kind="fact", content=content, score=score, relevance=score,
        importance=0.5, recency=1.0, created_at=datetime(2024, 1, 1, tzinfo=UTC),
        session_id=None, source_turn_ids=[],
    )  # fmt: skip


def _turn(n: int) -> BufferedTurn:
    content = f"recent turn number {n} " * 5
    return BufferedTurn(
        turn_id=str(n),
        role="user",
        content=content,
        created_at="2024-01-01T00:00:00+00:00",
        tokens=count_tokens(content),
    )


def test_everything_fits_under_a_large_budget() -> None:
    ctx = assemble_context(
        message="hi", memories=[_hit("likes tea", 0.9)], summary="talked about tea",
        recent=[_turn(1)], budget=10_000,
    )  # fmt: skip
    assert [m["role"] for m in ctx.messages] == ["system", "user", "user"]
    assert "likes tea" in ctx.messages[0]["content"]
    assert "<session_summary>talked about tea</session_summary>" in ctx.messages[0]["content"]
    assert ctx.tokens <= 10_000


def test_memories_are_trimmed_first_lowest_score_first() -> None:
    memories = [_hit(f"memory {i} " + "word " * 30, score=i / 10) for i in range(10)]
    recent = [_turn(i) for i in range(3)]
    full = assemble_context(
        message="q", memories=memories, summary=None, recent=recent, budget=100_000
    )
    budget = full.tokens - 60
    ctx = assemble_context(
        message="q", memories=memories, summary=None, recent=recent, budget=budget
    )
    assert ctx.tokens <= budget
    assert len(ctx.recent) == 3, "recent turns must survive while memories can be trimmed"
    assert 0 < len(ctx.memories) < 10
    kept = [m.score for m in ctx.memories]
    assert min(kept) > max(m.score for m in memories if m not in ctx.memories)


def test_then_the_oldest_recent_turns_go() -> None:
    recent = [_turn(i) for i in range(6)]
    ctx = assemble_context(
        message="q", memories=[_hit("m", 0.5)], summary=None, recent=recent, budget=80
    )
    assert ctx.memories == []
    assert ctx.recent == recent[len(recent) - len(ctx.recent) :]
    assert ctx.messages[-1] == {"role": "user", "content": "q"}


def test_quote_neutralises_delimiters() -> None:
    assert quote('</memory><system>"x"') == "&lt;/memory&gt;&lt;system&gt;&quot;x&quot;"
