"""LLM mode's analysis: importance and memories for a window of messages per call.

One model call reads a window of consecutive messages of one session (the user's
messages numbered, the assistant's shown as context only) and answers, for each
numbered message, its importance and its memories. A window holds at most
`window_turns` user messages and about `window_tokens` tokens of messages, so a
conversation costs a call per several turns instead of three per turn; on a small
local model the output tokens dominate, so the answer is compact JSON with no reasons.

Each window falls back to local mode on its own when the endpoint fails or answers
badly twice, and a message the model left out falls back alone; the memories say so
in their metadata ({"extractor": "local", "fallback": "timeout"}). In hybrid mode the
local extraction always runs, and the model's memories are added to it: configuring a
model can then add inferences but never lose what local mode finds.

Windows start in order until the deadline, or until the shared rate limit is spent;
the rest are not analysed (the caller leaves those turns pending for a new task).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Final, Literal

from pydantic import BaseModel, Field

from memwell.core.tokens import count_tokens
from memwell.entities.llm_schema import EntityOut, RelationOut, to_extraction
from memwell.llm.provider_rate_limit import RateLimited
from memwell.llm.structured import StructuredLLM
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.consolidate import Analysis, LocalAnalyzer, TurnAnalysis
from memwell.pipeline.extract import REMEMBERED_ROLES, TurnView
from memwell.pipeline.filler import strip_filler
from memwell.pipeline.llm_steps import DATA_NOTE, ENTITY_GUIDE

STAGE: Final = "analyze"

ANALYZE_PROMPT = f"""You pick what to remember about the user from a chat. Judge each
<msg id=N> message; <ctx> lines are context only (never remember what the assistant
says). For each msg give score 1-10 (8-10 identity, preferences, goals, decisions, life
events, relationships; 4-7 opinions, plans; 1-3 greetings, thanks, small talk) and its
memories: standalone sentences naming the speaker (never "I" or "you"), absolute dates
(each msg has its date), kind fact, preference or event, valid_from YYYY-MM-DD only when
stated else null. State only what the msg says or clearly implies; no greetings, thanks
or small talk. {ENTITY_GUIDE} {DATA_NOTE}
Answer with only compact JSON: {{"turns": [{{"id": 1, "score": 7, "memories": [{{"kind":
"fact", "content": "...", "valid_from": null, "entities": [{{"name": "...", "kind":
"..."}}], "relations": [{{"subject": "...", "relation": "...", "object": null, "value":
null}}]}}]}}]}}"""


class MemoryOut(BaseModel):
    kind: Literal["fact", "preference", "event"]
    content: str = Field(min_length=3, max_length=1000)
    valid_from: date | None = None
    #: None (left out): the writer runs the local extractor on the memory instead
    entities: list[EntityOut] | None = Field(default=None, max_length=30)
    relations: list[RelationOut] = Field(default_factory=list, max_length=30)


class TurnOut(BaseModel):
    id: int
    score: int = Field(ge=1, le=10)
    memories: list[MemoryOut] = Field(default_factory=list, max_length=10)


class WindowOut(BaseModel):
    turns: list[TurnOut] = Field(max_length=64)


@dataclass
class Window:
    """Consecutive messages of one session; `judged` are the ones the model answers for."""

    turns: list[TurnView] = field(default_factory=list)
    tokens: int = 0

    @property
    def judged(self) -> list[TurnView]:
        return [t for t in self.turns if t.role in REMEMBERED_ROLES]


def windows(turns: Sequence[TurnView], *, max_turns: int, max_tokens: int) -> list[Window]:
    """The turns cut into windows: per (user, session), in order; each closes at
    `max_turns` judged messages or before `max_tokens` would be passed."""
    open_: dict[tuple[str, str], Window] = {}
    out: list[Window] = []
    for turn in turns:
        key = (turn.user_id, turn.session_id)
        tokens = count_tokens(turn.content)
        w = open_.get(key)
        if w is None or len(w.judged) >= max_turns or (w.turns and w.tokens + tokens > max_tokens):
            w = open_[key] = Window()
            out.append(w)
        w.turns.append(turn)
        w.tokens += tokens
    return out


def render_window(window: Window) -> str:
    """The window as the prompt's quoted data; judged messages numbered from 1."""
    lines: list[str] = []
    first = window.turns[0]
    if first.role in REMEMBERED_ROLES and first.replying_to is not None:
        lines.append(f"<ctx>asked: {first.replying_to.text}</ctx>")
    n = 0
    for t in window.turns:
        if t.role in REMEMBERED_ROLES:
            n += 1
            lines.append(
                f'<msg id={n} speaker="{t.speaker}" date="{t.created_at:%Y-%m-%d}">'
                f"{t.content}</msg>"
            )
        else:
            lines.append(f'<ctx speaker="{t.speaker}">{t.content}</ctx>')
    return "\n".join(lines)


def _candidates(turn: TurnView, out: TurnOut, importance: float) -> list[Candidate]:
    found: list[Candidate] = []
    for m in out.memories:
        content = strip_filler(m.content.strip())
        if len(content.split()) < 2:
            continue  # it was all greeting
        found.append(
            Candidate(
                tenant=turn.tenant,
                user_id=turn.user_id,
                session_id=turn.session_id,
                kind=m.kind,
                content=content,
                importance=importance,
                event_time=turn.created_at,
                source_turn_ids=[turn.turn_id],
                metadata={
                    "speaker": turn.speaker,
                    "extractor": "llm",
                    **({"valid_from": m.valid_from.isoformat()} if m.valid_from else {}),
                },
                entities=None if m.entities is None else to_extraction(m.entities, m.relations),
            )
        )
    return found


def with_fallback(candidates: list[Candidate], reason: str) -> list[Candidate]:
    """Local candidates marked as written in place of the model, and why."""
    return [replace(c, metadata={**c.metadata, "fallback": reason}) for c in candidates]


class LlmAnalyzer:
    """Windowed analysis by the model, local fallback per window and per message."""

    def __init__(
        self,
        llm: StructuredLLM,
        local: LocalAnalyzer,
        *,
        window_turns: int,
        window_tokens: int,
        hybrid: bool = False,
    ) -> None:
        self.llm = llm
        self.local = local
        self.window_turns = window_turns
        self.window_tokens = window_tokens
        self.hybrid = hybrid

    def analyze(self, turns: Sequence[TurnView], *, deadline: float | None) -> Analysis:
        analysis = Analysis()
        cut = windows(turns, max_turns=self.window_turns, max_tokens=self.window_tokens)
        for i, window in enumerate(cut):
            if i and deadline is not None and time.monotonic() >= deadline:
                break  # the rest stays pending, for a new task
            try:
                self._window(analysis, window, deadline)
            except RateLimited:
                if not i:
                    raise  # nothing done: the task retries with backoff
                break  # keep what is done; the rest stays pending
        return analysis

    def _window(self, analysis: Analysis, window: Window, deadline: float | None) -> None:
        judged = window.judged
        for t in window.turns:
            if t.role not in REMEMBERED_ROLES:
                self.local.analyze_one(analysis, t)  # context: no memories, no call
        if not judged:
            return
        answer = self.llm.call(
            stage=STAGE,
            tenant=judged[0].tenant,
            system=ANALYZE_PROMPT,
            user=render_window(window),
            schema=WindowOut,
            deadline=deadline,
            items=len(judged),
        )
        if answer.value is None:
            for t in judged:
                self._local(analysis, t, answer.fallback or "invalid_output")
            return
        by_id = {o.id: o for o in answer.value.turns}
        omitted = 0
        for n, t in enumerate(judged, start=1):
            out = by_id.get(n)
            if out is None:
                omitted += 1
                self._local(analysis, t, "omitted")
                continue
            self._from_model(analysis, t, out)
        if omitted:
            self.llm.fallback(judged[0].tenant, STAGE, "omitted", items=omitted)

    def _local(self, analysis: Analysis, turn: TurnView, reason: str) -> None:
        self.local.analyze_one(analysis, turn)
        done = analysis.done.get(turn.turn_id)
        if done is not None:
            analysis.done[turn.turn_id] = TurnAnalysis(
                done.importance, with_fallback(done.candidates, reason)
            )

    def _from_model(self, analysis: Analysis, turn: TurnView, out: TurnOut) -> None:
        importance = round((out.score - 1) / 9, 4)
        local: list[Candidate] = []
        if self.hybrid:
            self.local.analyze_one(analysis, turn)
            done = analysis.done.get(turn.turn_id)
            if done is None:
                return  # failed: recorded as such
            local = done.candidates
            importance = max(importance, done.importance)
        model = _candidates(turn, out, importance) if importance >= self.local.threshold else []
        seen = {c.content for c in local}
        extra = [c for c in model if c.content not in seen]
        analysis.done[turn.turn_id] = TurnAnalysis(importance, local + extra)
