"""LLM mode's analysis: the memories of a window of messages, in one model call.

One model call reads a window of consecutive messages of one session (the user's
messages numbered, the assistant's shown as context only) and answers with a flat list
of memories, each naming the message it comes from and scoring it. A window holds at
most `window_turns` user messages and about `window_tokens` tokens of messages, so a
conversation costs a call per several turns instead of three per turn. On a small local
model the output tokens dominate the time, so the answer lists only what is worth
remembering: a message the model passes over costs it nothing, and gets local mode's
importance with no memory.

Each memory comes with a score and a kind; the full answer also gives the date it
holds from, and its entities and relations. The brief answer (`brief`, for a small
local model, whose time goes into every token it writes) leaves those out, and the
writer runs the local entity extractor on the memory. A score or kind left out is
filled by local mode's rules.

Each window falls back to local mode on its own when the endpoint fails or answers
badly twice; the memories say so in their metadata ({"extractor": "local",
"fallback": "timeout"}). The answer's values pass memwell/llm/output_rules.py: a bad
score, kind or date is mended, and a memory whose text breaks the doors' rule is
dropped; a message left with no memory that way is consolidated by local mode
("fallback": "invalid_value"). In hybrid mode local extraction always runs too, and
memwell/pipeline/hybrid.py joins the two: local memories stay as they are, and the
model's are added where they say something new, so configuring a model never loses
what local mode finds (a message the model passes over keeps its local memories,
ranked lower). A memory citing the wrong message goes to the one whose words it shares.

Windows start in order while the model, at the pace of its calls so far, can answer
before the deadline, and until the shared rate limit is spent; the rest are not
analysed (the caller leaves those turns pending for a new task).

A model that is merely slow keeps its work. A window whose call runs out of time is
not handed to local mode: its turns stay pending for a new task, and this process
sends windows half as large from then on, so the slow model answers them in the time
it has (and windows grow again while it keeps up). Local mode writes a window only
when the model is down or wrong: an error, a bad answer, or no answer in time even for
a window of one message. After that, until the endpoint answers again, a window that
runs out of time falls back at once rather than being halved again.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Annotated, Final

from pydantic import BaseModel, Field

from memwell.core.tokens import count_tokens
from memwell.entities.llm_schema import EntityOut, RelationOut, to_extraction
from memwell.llm.output_rules import (
    INVALID_OUTPUT,
    INVALID_VALUE,
    SANE_DATE,
    TEXT_RULE,
    clamped,
    droppable,
    one_of,
    whole_number,
)
from memwell.llm.provider_rate_limit import RateLimited
from memwell.llm.structured import TIMEOUT, StructuredLLM
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.consolidate import Analysis, LocalAnalyzer, TurnAnalysis
from memwell.pipeline.extract import REMEMBERED_ROLES, TurnView, classify
from memwell.pipeline.filler import strip_filler
from memwell.pipeline.hybrid import combine, message_sources, passed_over
from memwell.pipeline.importance import score_text, split_sentences
from memwell.pipeline.llm_steps import DATA_NOTE, ENTITY_GUIDE
from memwell.pipeline.rewrite import standalone

STAGE: Final = "analyze"
KINDS: Final = ("fact", "preference", "event")
#: Far more messages than a window holds: a larger number names none of them.
MAX_MESSAGE_ID: Final = 10_000
#: Output tokens allowed per judged message (brief and full answers), and for the
#: answer's frame: room for about two memories each, and a stop for a small model that
#: repeats itself until the context is full.
TOKENS_PER_MESSAGE_BRIEF: Final = 70
TOKENS_PER_MESSAGE: Final = 120
TOKENS_PER_ANSWER: Final = 60

_ANALYZE_HEAD = """You pick what to remember about the people in a chat. Read each
<msg id=N> message; <ctx> lines are context only (never remember what the assistant
says). Write each thing worth remembering as one standalone sentence naming the
speaker (never "I" or "you"), with absolute dates (a <date> line dates the msgs after
it): identity, preferences, goals, decisions, life events, relationships, opinions,
plans. State only what the msg says or clearly implies. Skip greetings, thanks, small
talk and questions; a msg may have no memory. Give each memory the id of its msg, a
score 1-10 (8-10 identity, life events, relationships, decisions; 4-7 opinions, plans)
and a kind (fact, preference or event)"""

#: The brief answer: no valid time, entities or relations (the local extractor reads
#: the memory for those).
ANALYZE_PROMPT_BRIEF = f"""{_ANALYZE_HEAD}. {DATA_NOTE}
Answer with only compact JSON: {{"memories": [{{"id": 1, "score": 8, "kind": "fact",
"content": "..."}}]}}"""

ANALYZE_PROMPT = f"""{_ANALYZE_HEAD}, and valid_from YYYY-MM-DD only when a date is
stated, else null. {ENTITY_GUIDE} {DATA_NOTE}
Answer with only compact JSON: {{"memories": [{{"id": 1, "score": 8, "kind": "fact",
"content": "...", "valid_from": null, "entities": [{{"name": "...", "kind": "..."}}],
"relations": [{{"subject": "...", "relation": "...", "object": null, "value":
null}}]}}]}}"""

#: "Melanie: I painted…": a small model copies the transcript's speaker label
_SPEAKER_LABEL: Final = re.compile(r"^\s*[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}:\s+")


# Its values follow memwell/llm/output_rules.py: a near miss in one field (a score of
# 11, an unknown kind, a date that is none) is mended, and text that breaks the doors'
# rule drops the memory, never the window's answer. (No docstring: the JSON schema sent
# to the model would carry it.)
class MemoryOut(BaseModel):
    #: the number of the message it comes from (0: none named; the words decide)
    id: Annotated[int, whole_number(0, MAX_MESSAGE_ID, missing=0)]
    #: None (the brief answer): local mode scores and classifies the memory's text
    score: Annotated[int | None, clamped(1, 10)] = None
    kind: Annotated[str | None, one_of(KINDS, "fact", optional=True)] = None
    content: Annotated[str, Field(min_length=3, max_length=1000), TEXT_RULE]
    valid_from: Annotated[date | None, SANE_DATE] = None
    #: None (left out): the writer runs the local extractor on the memory instead
    entities: Annotated[list[EntityOut], Field(max_length=30), droppable(30)] | None = None
    relations: Annotated[list[RelationOut], Field(max_length=30), droppable(30)] = Field(
        default_factory=list
    )


class WindowOut(BaseModel):
    memories: Annotated[list[MemoryOut], Field(max_length=128), droppable(128)] = Field(
        default_factory=list
    )


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
    """The window as the prompt's quoted data; judged messages numbered from 1. The
    date stands on a line of its own when it changes, not on every message: a CPU model
    reads the tags of every message at every call."""
    lines: list[str] = []
    first = window.turns[0]
    if first.role in REMEMBERED_ROLES and first.replying_to is not None:
        lines.append(f"<ctx>asked: {first.replying_to.text}</ctx>")
    n, day = 0, ""
    for t in window.turns:
        if (said := f"{t.created_at:%Y-%m-%d}") != day:
            day = said
            lines.append(f"<date>{day}</date>")
        if t.role in REMEMBERED_ROLES:
            n += 1
            lines.append(f'<msg id={n} from="{t.speaker}">{t.content}</msg>')
        else:
            lines.append(f'<ctx from="{t.speaker}">{t.content}</ctx>')
    return "\n".join(lines)


def tidy(content: str, turn: TurnView) -> tuple[str, bool]:
    """A model's memory as local mode writes its own: no speaker label, greeting or
    question; the speaker named instead of "I", dates made absolute (True if one was). A
    small model often copies a message where it should restate it; this makes the copy
    a memory. Empty when nothing is left."""
    text = strip_filler(_SPEAKER_LABEL.sub("", content.strip(), count=1))
    statements = [s for s in split_sentences(text) if not s.endswith("?")]
    if not statements:
        return "", False
    return standalone(" ".join(statements), speaker=turn.speaker, when=turn.created_at)


@dataclass(frozen=True)
class Sourced:
    """A model memory and the other messages of its window it draws on (their turn ids)."""

    memory: MemoryOut
    also: tuple[str, ...] = ()


def _candidates(turn: TurnView, memories: list[Sourced], floor: float) -> list[Candidate]:
    """The model's memories of `turn`; each at least `floor` important."""
    found: list[Candidate] = []
    agent_id = turn.metadata.get("agent_id")
    for sourced in memories:
        m = sourced.memory
        content, dated = tidy(m.content, turn)
        if len(content.split()) < 2:
            continue  # it was all greeting or questions
        scored = score_text(content) if m.score is None else (m.score - 1) / 9
        found.append(
            Candidate(
                tenant=turn.tenant,
                user_id=turn.user_id,
                session_id=turn.session_id,
                kind=m.kind or classify(content, dated=dated),
                content=content,
                importance=round(max(floor, scored), 4),
                event_time=turn.created_at,
                source_turn_ids=[turn.turn_id, *sourced.also],
                agent_id=agent_id if isinstance(agent_id, str) else None,
                metadata={
                    "speaker": turn.speaker,
                    "extractor": "llm",
                    **({"valid_from": m.valid_from.isoformat()} if m.valid_from else {}),
                },
                entities=None if m.entities is None else to_extraction(m.entities, m.relations),
            )
        )
    return found


def dropped_from(dropped: Sequence[object], judged: int) -> set[int]:
    """The messages (numbered from 1) that memories dropped from the answer named."""
    cited = (item.get("id") for item in dropped if isinstance(item, dict))
    return {n for n in cited if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= judged}


def with_fallback(candidates: list[Candidate], reason: str) -> list[Candidate]:
    """Local candidates marked as written in place of the model, and why."""
    return [replace(c, metadata={**c.metadata, "fallback": reason}) for c in candidates]


class LlmAnalyzer:
    """Windowed analysis by the model, local fallback per window."""

    def __init__(
        self,
        llm: StructuredLLM,
        local: LocalAnalyzer,
        *,
        window_turns: int,
        window_tokens: int,
        hybrid: bool = False,
        brief: bool = False,
        call_grace_s: float = 0.0,
    ) -> None:
        self.llm = llm
        self.local = local
        self.window_turns = window_turns
        self.window_tokens = window_tokens
        self.hybrid = hybrid
        #: how far past the deadline a call started before it may run: a window started
        #: on time is answered, not cut off (its turns would fall back)
        self.call_grace_s = call_grace_s
        #: how long the model has taken per judged message, smoothed over the calls that
        #: answered; None until one has
        self.seconds_per_message: float | None = None
        #: the most judged messages per window in this process: halved when a call runs
        #: out of time, doubled back while the model keeps up
        self.window_cap = window_turns
        #: a window of one message ran out of time, and no call has answered since
        self.stalled = False
        self.prompt = ANALYZE_PROMPT_BRIEF if brief else ANALYZE_PROMPT
        self.tokens_per_message = TOKENS_PER_MESSAGE_BRIEF if brief else TOKENS_PER_MESSAGE

    def analyze(self, turns: Sequence[TurnView], *, deadline: float | None) -> Analysis:
        analysis = Analysis()
        cut = windows(turns, max_turns=self.window_cap, max_tokens=self.window_tokens)
        for i, window in enumerate(cut):
            if i and deadline is not None and time.monotonic() + self.expected_s(window) > deadline:
                # The rest stays pending, for a new task: a call cut off by the deadline
                # would fall back, and on a one-slot server it would still hold the slot.
                break
            try:
                if not self._window(analysis, window, deadline):
                    break  # the model is slow: this window and the rest wait for a new task
            except RateLimited:
                if not i:
                    raise  # nothing done: the task retries with backoff
                break  # keep what is done; the rest stays pending
        return analysis

    def expected_s(self, window: Window) -> float:
        """How long the model should take over `window`, from the calls so far."""
        if self.seconds_per_message is None:
            return 0.0
        return self.seconds_per_message * len(window.judged)

    def _observe(self, seconds: float, messages: int) -> None:
        observed = seconds / max(1, messages)
        last = self.seconds_per_message
        self.seconds_per_message = observed if last is None else 0.7 * last + 0.3 * observed
        # Keeping up again: a window twice as large should still end well inside a call.
        wider = min(self.window_turns, 2 * self.window_cap)
        if wider > self.window_cap and self.seconds_per_message * wider <= self.llm.timeout_s / 2:
            self.window_cap = wider

    def _out_of_time(self, analysis: Analysis, window: Window) -> bool:
        """A window whose call ran out of time: sent again later at half the size
        (False: leave it pending) while the model is only slow; handed to local mode
        when even one message was too much for it, or it has stopped answering."""
        judged = window.judged
        if len(judged) > 1 and not self.stalled:
            self.window_cap = max(1, len(judged) // 2)
            self.llm.deferral(judged[0].tenant, STAGE, items=len(judged))
            return False
        self.stalled = True
        self.window_cap = self.window_turns  # one call per full window until it answers
        self.llm.fallback(judged[0].tenant, STAGE, TIMEOUT, items=len(judged))
        for t in judged:
            self._local(analysis, t, TIMEOUT)
        return True

    def _window(self, analysis: Analysis, window: Window, deadline: float | None) -> bool:
        """Analyse `window` into `analysis`; False when it is left for a later call."""
        judged = window.judged
        if not judged:
            for t in window.turns:
                self.local.analyze_one(analysis, t)  # context: no memories, no call
            return True
        started = time.monotonic()
        answer = self.llm.call(
            stage=STAGE,
            tenant=judged[0].tenant,
            system=self.prompt,
            user=render_window(window),
            schema=WindowOut,
            deadline=None if deadline is None else deadline + self.call_grace_s,
            items=len(judged),
            max_tokens=TOKENS_PER_ANSWER + self.tokens_per_message * len(judged),
            on_timeout="defer",
        )
        if answer.deferred and not self._out_of_time(analysis, window):
            return False
        for t in window.turns:
            if t.role not in REMEMBERED_ROLES:
                self.local.analyze_one(analysis, t)  # context: no memories, no call
        if answer.deferred:
            return True  # fell back
        if answer.value is None:
            for t in judged:
                self._local(analysis, t, answer.fallback or INVALID_OUTPUT)
            return True
        self.stalled = False
        self._observe(time.monotonic() - started, len(judged))
        by_message: dict[int, list[Sourced]] = {}
        written: set[str] = set()
        texts, names = [t.content for t in judged], sorted({t.speaker for t in judged})
        context = [t.content for t in window.turns if t.role not in REMEMBERED_ROLES]
        for m in answer.value.memories:
            if m.content in written:
                continue  # a small model repeating itself, under the next ids
            written.add(m.content)
            sources = message_sources(m.content, m.id, texts, context=context, names=names)
            if sources:
                also = tuple(judged[k - 1].turn_id for k in sources[1:])
                by_message.setdefault(sources[0], []).append(Sourced(m, also))
        lost = dropped_from(answer.dropped, len(judged))
        for n, t in enumerate(judged, start=1):
            if n in lost and n not in by_message and not self.hybrid:
                # Its memory broke a rule: local mode speaks for the message instead.
                self._local(analysis, t, INVALID_VALUE)
            else:
                self._from_model(analysis, t, by_message.get(n, []), lost=n in lost)
        return True

    def _local(self, analysis: Analysis, turn: TurnView, reason: str) -> None:
        self.local.analyze_one(analysis, turn)
        done = analysis.done.get(turn.turn_id)
        if done is not None:
            analysis.done[turn.turn_id] = TurnAnalysis(
                done.importance, with_fallback(done.candidates, reason)
            )

    def _from_model(
        self, analysis: Analysis, turn: TurnView, memories: list[Sourced], *, lost: bool = False
    ) -> None:
        if self.hybrid:
            self.local.analyze_one(analysis, turn)
            done = analysis.done.get(turn.turn_id)
            if done is None:
                return  # failed: recorded as such
            # Importance by the local rule too: retrieval ranks by it, and a small
            # model scores nearly everything 8 or 9, which lifts its copies above the
            # local memories they would otherwise sit beside.
            model = [
                replace(c, importance=round(score_text(c.content), 4))
                for c in _candidates(turn, memories, 0.0)
            ]
            keep = [c for c in model if c.importance >= self.local.threshold]
            local = done.candidates if memories or lost else passed_over(done.candidates)
            analysis.done[turn.turn_id] = TurnAnalysis(done.importance, combine(keep, local))
            return
        model = _candidates(turn, memories, 0.0)
        keep = [c for c in model if c.importance >= self.local.threshold]
        scored = [c.importance for c in model]
        importance = max(scored) if scored else self.local.importance(turn)
        analysis.done[turn.turn_id] = TurnAnalysis(importance, keep)
