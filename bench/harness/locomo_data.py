"""A LoCoMo-format file for evaluation: its turns as the importer reads them, and its
cleaned questions.

The turns come from `memwell.intake.importers.read_locomo`, the same reader `memwell import
--format locomo` uses, so the evaluation ingests exactly what a user would. Questions
follow ../shared/data/README.md: evidence ids are normalised with D:?(\\d+):(\\d+),
ids naming no turn are dropped, and questions left without evidence are skipped.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from memwell.intake.importers import read_locomo
from memwell.intake.turns import TurnIn
from memwell.pipeline.extract import Question as Asked
from memwell.pipeline.extract import TurnView, last_question, speaker_name, without_speaker

_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]  # dia ids
    #: the gold answer; empty for adversarial questions, whose answer is that nothing says
    answer: str = ""


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: list[TurnIn]  # ids "{sample_id}:{dia_id}"
    questions: list[Question]
    last_date: datetime


def dia_id(turn: TurnIn) -> str:
    return turn.id.removeprefix(f"{turn.user_id}:")


def turn_view(turn: TurnIn, tenant: str = "eval") -> TurnView:
    """The turn as extraction sees it once stored (no question context)."""
    assert turn.created_at is not None  # the reader dates every turn
    return TurnView(
        tenant, turn.id, turn.user_id, turn.session_id, turn.role, turn.content,
        turn.created_at, dict(turn.metadata),
    )  # fmt: skip


def stored_views(turns: list[TurnIn], tenant: str = "eval") -> list[TurnView]:
    """The turns as a worker's extraction sees them, in the same order: each with the
    question its session's previous turn (by event time, then arrival) ended with, as
    memwell/pipeline/replies.py finds it. An answer's memory text then carries the
    question, so it is longer than the turn alone: the texts a worker embeds."""
    order = sorted(
        range(len(turns)),
        key=lambda i: (turns[i].user_id, turns[i].session_id, turns[i].created_at, i),
    )
    asked: dict[int, Asked] = {}
    for prev, cur in zip(order, order[1:], strict=False):
        p, c = turns[prev], turns[cur]
        if (p.user_id, p.session_id) != (c.user_id, c.session_id):
            continue
        text = last_question(without_speaker(p.content, speaker_name(p.role, dict(p.metadata))))
        if text is not None:
            asked[cur] = Asked(turn_id=p.id, text=text)
    return [replace(turn_view(t, tenant), replying_to=asked.get(i)) for i, t in enumerate(turns)]


def _questions(sample: dict[str, Any], known: set[str]) -> list[Question]:
    questions = []
    for qa in sample["qa"]:
        ids = {f"D{a}:{b}" for ev in qa.get("evidence", []) for a, b in _EVIDENCE.findall(str(ev))}
        ids &= known
        if ids:
            answer = str(qa.get("answer", ""))
            questions.append(
                Question(str(qa["question"]), int(qa["category"]), frozenset(ids), answer)
            )
    return questions


def load(path: Path) -> list[Conversation]:
    by_user: dict[str, list[TurnIn]] = defaultdict(list)
    for turn in read_locomo(path):
        by_user[turn.user_id].append(turn)
    conversations = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        turns = by_user[str(sample["sample_id"])]
        conversations.append(
            Conversation(
                sample_id=str(sample["sample_id"]),
                turns=turns,
                questions=_questions(sample, {dia_id(t) for t in turns}),
                last_date=max(t.created_at for t in turns if t.created_at),
            )
        )
    return conversations
