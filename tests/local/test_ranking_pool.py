"""The ranking-pool bench's levers (bench/evals/ranking_pool.py) re-rank the service's
hits as the statement change each stands for would, and its evidence bands count each
evidence turn once, at the first hit that covers it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from bench.evals.ranking_pool import (
    Asked,
    evidence_bands,
    named_speaker,
    one_hit_per_turn,
    speaker_first,
    summaries_ahead,
)
from bench.harness.locomo_data import Conversation, Question
from memwell.intake.turns import TurnIn
from memwell.retrieval.search import MemoryHit

WHEN = datetime(2023, 5, 8, tzinfo=UTC)
CONV = Conversation(
    sample_id="conv-x",
    turns=[
        TurnIn(
            id=f"conv-x:D1:{n}",
            user_id="conv-x",
            session_id="s1",
            content=text,
            created_at=WHEN,
            metadata={"speaker": speaker},
        )
        for n, (speaker, text) in enumerate(
            [("Ada", "I bought a cello."), ("Ben", "I adopted a cat."), ("Ada", "Lisbon!")], 1
        )
    ],
    questions=[],
    last_date=WHEN,
)


def _hit(name: str, score: float, turns: list[str], *, speaker: str = "", kind: str = "fact"
         ) -> MemoryHit:  # fmt: skip
    return MemoryHit(
        id=uuid.uuid4(), kind=kind, content=name, score=score, relevance=score,
        importance=0.5, recency=1.0, created_at=WHEN, similarity=score, text_rank=0.0,
        session_id="s1", agent_id=None, source_turn_ids=[f"conv-x:{t}" for t in turns],
        metadata={"speaker": speaker} if speaker else {},
    )  # fmt: skip


def _asked(text: str, hits: list[MemoryHit], evidence: set[str] | None = None) -> Asked:
    question = Question(text=text, category=1, evidence=frozenset(evidence or {"D1:1"}))
    return Asked(CONV, question, hits)


def _names(hits: list[MemoryHit]) -> list[str]:
    return [h.content for h in hits]


def test_a_hit_whose_turns_are_covered_gives_its_place_to_the_next() -> None:
    hits = [_hit("a", 0.9, ["D1:1", "D1:2"]), _hit("b", 0.8, ["D1:2"]),
            _hit("c", 0.7, ["D1:3"]), _hit("d", 0.6, [])]  # fmt: skip
    # b's turn is a's too; a hit citing no turn covers nothing and keeps its place.
    assert _names(one_hit_per_turn(hits)) == ["a", "c", "d", "b"]


def test_only_a_question_naming_exactly_one_speaker_names_one() -> None:
    assert named_speaker(CONV, Question("What did Ada buy?", 1, frozenset())) == "Ada"
    assert named_speaker(CONV, Question("What do Ada and Ben share?", 1, frozenset())) is None
    # A name inside another word is not the speaker.
    assert named_speaker(CONV, Question("Who is Adam?", 1, frozenset())) is None


def test_the_named_speakers_memories_go_first_by_the_margin() -> None:
    hits = [_hit("ben's", 0.90, ["D1:2"], speaker="Ben"),
            _hit("ada's", 0.85, ["D1:1"], speaker="Ada"),
            _hit("ben's far ahead", 1.2, ["D1:2"], speaker="Ben"),
            _hit("nobody's", 0.84, ["D1:3"])]  # fmt: skip
    ranked = _names(speaker_first(_asked("What did Ada buy?", hits), margin=0.1))
    # Another speaker's memory falls by the margin, not below every one of Ada's.
    assert ranked == ["ben's far ahead", "ada's", "nobody's", "ben's"]
    assert _names(speaker_first(_asked("What do they like?", hits))) == _names(hits)


def test_summaries_rise_by_the_margin() -> None:
    hits = [_hit("fact", 0.80, ["D1:1"]), _hit("summary", 0.75, ["D1:1"], kind="summary"),
            _hit("weak summary", 0.60, ["D1:2"], kind="summary")]  # fmt: skip
    assert _names(summaries_ahead(_asked("q", hits), margin=0.06)) == [
        "summary", "fact", "weak summary"
    ]  # fmt: skip


def test_each_evidence_turn_counts_once_in_the_band_of_its_first_hit() -> None:
    filler = [_hit(f"filler {i}", 0.5, ["D9:9"]) for i in range(14)]
    hits = [_hit("first", 0.9, ["D1:1"]), *filler, _hit("again", 0.4, ["D1:1", "D1:2"]),
            *filler, *filler, _hit("late", 0.1, ["D1:3"])]  # fmt: skip
    asked = _asked("q", hits, evidence={"D1:1", "D1:2", "D1:3", "D1:4"})
    # D1:1 at rank 1, D1:2 at rank 16, D1:3 at rank 45, D1:4 never.
    assert evidence_bands([asked], pool=50) == {1: [1, 1, 1, 1]}
    # A smaller pool leaves D1:3 out of it.
    assert evidence_bands([asked], pool=40) == {1: [1, 1, 0, 2]}
