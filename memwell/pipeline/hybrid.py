"""How hybrid mode joins the model's memories of a message to local mode's.

Local mode's memories are the floor: configuring a model must never recall less. So
every local memory stays, as local mode wrote it. A model memory that says nothing the
local ones do not is dropped (a copy would take a retrieval slot twice); one that adds
enough new words is kept beside them, scored by the local rule: what the model
inferred. (Letting the model's wording of the same fact replace local mode's lost a
little recall on LoCoMo with the 0.5B model: its restatements drop details.)

The model's reading ranks local memories too: a message it read and found nothing
worth remembering in keeps its local memories at half their importance, so chatter a
capable model passes over sits below what it kept, without leaving the store.

A small model also cites the wrong message, and restates what the assistant said. Each
of its memories goes to the message of its window whose words it shares most, unless it
shares none with any (an inference: its cited message keeps it) or shares half as many
with the message it cites (a memory joining two messages: the citation stands, and the
other message is a source too), and is dropped when an assistant's line shares more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from memwell.pipeline import importance
from memwell.pipeline.candidate import Candidate

#: The cited message keeps a memory that shares at least 1/CITED_SHARE as many words
#: with it as with the best message: a capable model's memory often joins what two
#: messages say, and its citation is right; a small model's wrong one shares little.
CITED_SHARE: Final = 2
#: A message other than the cited one is a source of the memory too when they share this
#: many content words: provenance lists every message a memory draws on, so erasing
#: either one erases it.
JOINED_WORDS: Final = 2
#: At least this share of a model memory's content words new: it adds something.
NEW_SHARE: Final = 0.34
#: The share of their importance local memories keep when the model, answering for
#: their message, wrote nothing about it.
PASSED_OVER: Final = 0.5
_ASKED: Final = " (asked: "


def content_words(text: str) -> set[str]:
    """The words that carry a memory's statement; the question it answers is not one."""
    return set(importance.content_words(text.split(_ASKED, 1)[0]))


def message_sources(
    content: str,
    cited: int,
    messages: Sequence[str],
    *,
    context: Sequence[str] = (),
    names: Sequence[str] = (),
) -> tuple[int, ...]:
    """The numbers (from 1) of the messages `content` comes from, the one it belongs to
    first: the message it shares most words with, `names` (the speakers, whom every
    memory names) left out; `cited` when it shares none, or half as many with the cited
    one, and then also the other message it shares most with, when that one shares
    `JOINED_WORDS` or more and half as many as the cited one (the memory joins the two).
    Empty when a `context` line (what the assistant said) shares more
    with it than any message: the memory restates the assistant."""
    words = content_words(content) - set().union(*(content_words(n) for n in names))
    overlaps = [len(words & content_words(m)) for m in messages]
    best = max(range(len(messages)), key=lambda i: overlaps[i], default=-1)
    said = max((len(words & content_words(c)) for c in context), default=0)
    if said > max(overlaps, default=0):
        return ()
    if best < 0 or not overlaps[best]:
        return (cited,)
    if not (1 <= cited <= len(messages) and overlaps[cited - 1] * CITED_SHARE >= overlaps[best]):
        return (best + 1,)
    others = [i for i in range(len(messages)) if i != cited - 1]
    other = max(others, key=lambda i: overlaps[i], default=-1)
    shared = overlaps[other] if other >= 0 else 0
    if shared >= JOINED_WORDS and shared * CITED_SHARE >= overlaps[cited - 1]:
        return (cited, other + 1)
    return (cited,)


def combine(model: Sequence[Candidate], local: Sequence[Candidate]) -> list[Candidate]:
    """The message's memories in hybrid mode: local mode's, and the model's that add
    enough (see the module docstring)."""
    known = set().union(*(content_words(c.content) for c in local))
    added = []
    for m in model:
        words = content_words(m.content)
        if words and len(words - known) >= NEW_SHARE * len(words):
            added.append(m)
            known |= words  # a second memory saying the same adds nothing more
    return [*local, *added]


def passed_over(local: Sequence[Candidate]) -> list[Candidate]:
    """Local memories of a message the model read and found nothing in: kept, ranked
    lower (importance is part of the retrieval score)."""
    return [replace(c, importance=round(c.importance * PASSED_OVER, 4)) for c in local]
