"""The local merge decision: is a new memory a paraphrase of an existing one?

Cosine similarity alone is not enough. Non-paraphrases often share most of their
words and differ in one fact ("revenue rose 5%" / "revenue rose 7%", "Ada moved to
Berlin" / "Ada moved to Lisbon"), which an embedding model scores close to 1. So a
merge needs both:

1. cosine >= the merge threshold (calibrated on MRPC, bench/evals/dedup.py), and
2. the fact guard, which blocks a merge when
   - the numbers differ ("5%" / "7%", "2019" / "2021");
   - a proper noun was swapped: each text names someone or something the other
     does not (a name only dropped is fine: paraphrases shorten);
   - one is negated and the other is not;
   - either text has more than MAX_NOVELTY of its content words missing from the
     other: then it carries information a merge would lose.

A guard failure means "same topic, different fact": never merged, possibly a
supersession instead (memwell/pipeline/slots.py).

Measured on MRPC train (bench/evals/dedup.py): cosine alone reaches precision 0.83
at 0.82 (0.89 only at 0.90, recall 0.35); with the guard, 0.82 gives precision
~0.91 at recall ~0.31. MERGE_THRESHOLD_DEFAULT is that point: the lowest threshold
whose precision clears 0.90 with the guard on, because a wrong merge silently loses
a fact while a missed one only leaves a near-duplicate row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from memwell.pipeline.importance import STOPWORDS

_NUMBER: Final = re.compile(r"\d+(?:[.,]\d+)*")
_PROPER: Final = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-zA-Z]+")
_NEGATION: Final = re.compile(r"\b(not|no|never|n't|none|nobody|nothing|neither|nor)\b", re.I)
MAX_NOVELTY: Final = 0.35
MERGE_THRESHOLD_DEFAULT: Final = 0.82
_WORD: Final = re.compile(r"[a-z0-9]+")
_NOT_NAMES: Final = frozenset({"I", "The", "A", "An", "It", "This", "That", "He", "She", "We"})


@dataclass(frozen=True)
class MergeDecision:
    merge: bool
    reason: str


def numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


def proper_nouns(text: str) -> set[str]:
    return {w.lower() for w in _PROPER.findall(text) if w not in _NOT_NAMES}


def negated(text: str) -> bool:
    return bool(_NEGATION.search(text.replace("’", "'")))


def novelty(a: str, b: str) -> float:
    """The larger share of either text's content words that the other lacks."""
    wa, wb = _content(a), _content(b)
    return max(len(wa - wb) / max(1, len(wa)), len(wb - wa) / max(1, len(wb)))


def _content(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def fact_guard(a: str, b: str) -> str | None:
    """Why two similar texts state different facts, or None when nothing says so."""
    if numbers(a) != numbers(b):
        return "numbers differ"
    na, nb = proper_nouns(a), proper_nouns(b)
    if na - nb and nb - na:
        return "names differ"
    if negated(a) != negated(b):
        return "negation differs"
    if novelty(a, b) > MAX_NOVELTY:
        return "new information"
    return None


def decide_merge(a: str, b: str, cosine: float, *, threshold: float) -> MergeDecision:
    """Merge when similar enough and the fact guard finds no differing fact."""
    if cosine < threshold:
        return MergeDecision(False, f"cosine {cosine:.3f} < {threshold:.2f}")
    why = fact_guard(a, b)
    if why is not None:
        return MergeDecision(False, why)
    return MergeDecision(True, f"paraphrase: cosine {cosine:.3f}")


def better_written(a: str, b: str) -> str:
    """The text to keep on a merge: the more informative one (more distinct words),
    then the longer, then the first (the existing memory)."""

    def key(t: str) -> tuple[int, int]:
        return (len(set(re.findall(r"\w+", t.lower()))), len(t))

    return b if key(b) > key(a) else a
