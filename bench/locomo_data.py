"""Reading a LoCoMo-format file: turns with their event times, and cleaned questions.

Follows ../shared/data/README.md: the speaker's name is part of a turn, an image
caption is appended, each session's date is its turns' event time, evidence ids are
normalised with D:?(\\d+):(\\d+) and questions left without evidence are skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_SESSION = re.compile(r"^session_(\d+)$")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    speaker: str
    content: str  # "Speaker: text" (+ " [image: caption]")
    when: datetime


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]  # dia ids


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    last_date: datetime


def parse_date(raw: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> an aware datetime (UTC; the data has no zone)."""
    clean = " ".join(raw.replace(",", " , ").split()).replace(" ,", ",")
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return datetime.strptime(clean, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo date: {raw!r}")


def _turn_text(raw: dict[str, Any]) -> str:
    text = f"{raw['speaker']}: {raw['text']}"
    if raw.get("blip_caption"):
        text += f" [image: {raw['blip_caption']}]"
    return text


def _conversation(sample: dict[str, Any]) -> Conversation:
    conv = sample["conversation"]
    turns: list[Turn] = []
    for key, value in conv.items():
        match = _SESSION.match(key)
        if not match or not isinstance(value, list):
            continue
        number = int(match.group(1))
        when = parse_date(conv[f"{key}_date_time"])
        turns += [
            Turn(str(t["dia_id"]), number, str(t["speaker"]), _turn_text(t), when) for t in value
        ]
    turns.sort(key=lambda t: (t.session, int(t.dia_id.split(":")[1])))
    known = {t.dia_id for t in turns}
    questions = []
    for qa in sample["qa"]:
        ids = {f"D{a}:{b}" for ev in qa.get("evidence", []) for a, b in _EVIDENCE.findall(str(ev))}
        ids &= known
        if ids:
            questions.append(Question(str(qa["question"]), int(qa["category"]), frozenset(ids)))
    return Conversation(
        sample_id=str(sample["sample_id"]),
        turns=turns,
        questions=questions,
        last_date=max(t.when for t in turns),
    )


def load(path: Path) -> list[Conversation]:
    return [_conversation(s) for s in json.loads(path.read_text())]
