"""Step 3 (local mode): candidate memories from a turn's sentences.

Each sentence that scores at or above the extraction threshold (memwell/pipeline/
importance.py) becomes one candidate, rewritten to read on its own with the speaker
named and relative dates resolved (memwell/pipeline/rewrite.py). Questions are not
memories. A fragment too short to stand alone ("So cool!") rides along with its
neighbour. Every candidate keeps its source turn id.

Who is speaking: the turn's `metadata.speaker` when given (documented in the turn
contract), else "The user" for user turns. Assistant, system and tool turns stay in
the episodic log but are not remembered: in local mode the assistant echoes retrieved
memories, and storing them would feed memory back into itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from memwell.pipeline.importance import content_words, score_text, score_turn, split_sentences
from memwell.pipeline.memories import Candidate
from memwell.pipeline.rewrite import standalone

REMEMBERED_ROLES: Final = frozenset({"user"})
MIN_CONTENT_WORDS: Final = 3

_PREFERENCE: Final = re.compile(
    r"\b(love[sd]?|like[sd]?|prefer\w*|favou?rite|enjoy\w*|hate[sd]?|can't stand|"
    r"fan of|into|passionate|allergic|vegan|vegetarian)\b",
    re.I,
)
_EVENT: Final = re.compile(
    r"\b(went|visited|moved|started|joined|finished|bought|adopted|got|met|took|"
    r"attended|won|lost|graduated|married|ran|travel(?:l)?ed|made|had|did|was|were|"
    r"on \d{1,2} [A-Z][a-z]+ \d{4}|in \d{4})\b"
)


@dataclass(frozen=True)
class TurnView:
    """What extraction needs of a turn; built from the ORM row or a payload."""

    tenant: str
    turn_id: str
    user_id: str
    session_id: str
    role: str
    content: str
    created_at: datetime
    metadata: dict[str, Any]

    @property
    def speaker(self) -> str:
        name = self.metadata.get("speaker")
        if isinstance(name, str) and name.strip():
            return name.strip()
        return "The user" if self.role == "user" else f"The {self.role}"


def classify(sentence: str, *, dated: bool) -> str:
    """fact, preference or event, from surface cues."""
    if _PREFERENCE.search(sentence):
        return "preference"
    if dated or _EVENT.search(sentence):
        return "event"
    return "fact"


def _units(text: str) -> list[str]:
    """Sentences, with fragments too short to stand alone joined to their neighbour."""
    units: list[str] = []
    pending = ""
    for sentence in split_sentences(text):
        if sentence.endswith("?"):
            units.append(sentence)  # a question stands apart; it is never a memory
            continue
        joined = f"{pending} {sentence}".strip()
        if len(content_words(joined)) < MIN_CONTENT_WORDS:
            pending = joined
            continue
        units.append(joined)
        pending = ""
    if pending:
        statements = [i for i, u in enumerate(units) if not u.endswith("?")]
        if statements:
            units[statements[-1]] = f"{units[statements[-1]]} {pending}"
        else:
            units.append(pending)
    return units


def extract_local(turn: TurnView, *, threshold: float) -> list[Candidate]:
    """Candidates from the turn's sentences scoring >= threshold."""
    if turn.role not in REMEMBERED_ROLES:
        return []
    candidates: list[Candidate] = []
    statements = [u for u in _units(turn.content) if not u.rstrip().endswith("?")]
    scored = [(score_text(u), u) for u in statements]
    for importance, unit in scored:
        if importance >= threshold:
            candidates.append(_candidate(turn, unit, importance))
    if not candidates and scored and score_turn(turn.content) >= threshold:
        # The turn matters as a whole though no single sentence does: keep its best one.
        importance, unit = max(scored)
        candidates.append(_candidate(turn, unit, threshold))
    caption = turn.metadata.get("image_caption")
    if isinstance(caption, str) and caption.strip():
        text = f"{turn.speaker} shared {caption.strip().rstrip('.')}."
        candidates.append(_candidate(turn, text, max(threshold, score_text(text)), kind="event"))
    return candidates


def _candidate(turn: TurnView, unit: str, importance: float, kind: str | None = None) -> Candidate:
    text, dated = standalone(unit, speaker=turn.speaker, when=turn.created_at)
    metadata: dict[str, Any] = {"speaker": turn.speaker, "extractor": "local"}
    agent_id = turn.metadata.get("agent_id")
    return Candidate(
        tenant=turn.tenant,
        user_id=turn.user_id,
        session_id=turn.session_id,
        kind=kind or classify(text, dated=dated),
        content=text,
        importance=round(importance, 4),
        event_time=turn.created_at,
        source_turn_ids=[turn.turn_id],
        agent_id=agent_id if isinstance(agent_id, str) else None,
        metadata=metadata,
    )
