"""Step 2 (local mode): how useful a turn or sentence is to remember, in 0..1.

A transparent, additive heuristic over surface cues, so an operator can read why a
turn scored what it did. It starts from a small prior and adds evidence:

- substance: content words (log-scaled, so rambling is not rewarded linearly);
- self-disclosure: first person with a verb ("I adopted", "my sister", "we moved");
- memorable topics: identity, family, work, plans, likes, life events, health, places;
- specifics: numbers, dates and time expressions, capitalised names mid-sentence;

and subtracts for what is rarely worth keeping:

- greetings, thanks, acknowledgements and generic praise ("wow, that's great!");
- pure questions (a question asks for a memory, it rarely states one).

The weights were set by hand and checked on LoCoMo dev (bench/evals/importance.py):
ROC AUC against "evidence turn" labels, next to the turn-length baseline. LLM mode
replaces this with the model's score in its windowed analysis
(memwell/pipeline/llm_analysis.py).
"""

from __future__ import annotations

import math
import re
from typing import Final

_WORD: Final = re.compile(r"[A-Za-z][A-Za-z'’]*|\d+")
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+")

STOPWORDS: Final = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "so",
        "to",
        "of",
        "in",
        "on",
        "at",
        "for",
        "with",
        "from",
        "by",
        "as",
        "is",
        "am",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "i",
        "me",
        "my",
        "mine",
        "we",
        "us",
        "our",
        "you",
        "your",
        "he",
        "him",
        "his",
        "she",
        "her",
        "they",
        "them",
        "their",
        "what",
        "which",
        "who",
        "whom",
        "how",
        "when",
        "where",
        "why",
        "do",
        "does",
        "did",
        "doing",
        "have",
        "has",
        "had",
        "not",
        "no",
        "just",
        "very",
        "really",
        "too",
        "also",
        "all",
        "any",
        "some",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "there",
        "here",
        "than",
        "then",
        "about",
        "up",
        "out",
        "over",
        "into",
        "oh",
        "ah",
        "um",
        "uh",
        "yeah",
        "yes",
        "ok",
        "okay",
        "well",
        "like",
    ]
)

_FIRST_PERSON: Final = re.compile(
    r"\b(i|i'm|i’m|i've|i’ve|i'd|i’d|i'll|i’ll|my|we|we're|we've|our|me)\b", re.I
)
_TOPIC: Final = re.compile(
    r"\b(name|born|age|years? old|birthday|live[sd]?|living|moved?|moving|home|house|city|"
    r"country|work(?:s|ed|ing)?|job|career|company|boss|promot\w*|hired|fired|quit|retir\w*|"
    r"school|college|universit\w*|degree|stud(?:y|ied|ying)|class(?:es)?|course|teacher|"
    r"married|marriage|wife|husband|partner|boyfriend|girlfriend|wedding|divorc\w*|kids?|"
    r"child(?:ren)?|son|daughter|mom|mother|dad|father|sister|brother|family|parents?|"
    r"grand\w+|friends?|dog|cat|pets?|puppy|adopt\w*|allerg\w*|sick|hospital|doctor|health|"
    r"diagnos\w*|vegan|vegetarian|favou?rite|love[sd]?|loving|hate[sd]?|prefer\w*|enjoy\w*|"
    r"hobby|hobbies|plan(?:s|ned|ning)?|goal|going to|gonna|decid\w*|want(?:s|ed)? to|hope|"
    r"dream|trip|travel\w*|visit\w*|vacation|concert|festival|race|marathon|bought|buy|car|"
    r"started|joined|volunteer\w*|painting|paint\w*|book|novel|music|guitar|piano|camping|"
    r"support group|church|sold|game|team|pottery|instrument|art|collect\w*|play(?:s|ed|ing)?|"
    r"sports?|cook\w*|garden\w*|allergic|photograph\w*|dance|danc\w+|sing\w*|write|writing)\b",
    re.I,
)
_NUMBER: Final = re.compile(r"\b\d+(?:[.,:]\d+)?\b")
_TIME: Final = re.compile(
    r"\b(yesterday|today|tomorrow|tonight|last|next|ago|since|week(?:end)?|month|year|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|"
    r"april|may|june|july|august|september|october|november|december|summer|winter|"
    r"spring|autumn|fall)\b",
    re.I,
)
_NAME_MID: Final = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]+")
_FILLER: Final = re.compile(
    r"^\W*(hi|hey|hello|bye|goodbye|thanks?|thank you|thx|ok(?:ay)?|sure|cool|great|"
    r"awesome|nice|wow|lol|haha|yes|yeah|yep|no|nope|sounds good|got it|see you|"
    r"take care|good (?:morning|night|evening)|congrat\w*|that'?s (?:great|awesome|"
    r"amazing|cool|so cool|wonderful|nice))\b",
    re.I,
)

PRIOR: Final = 0.12


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry meaning (not stop words, not one letter)."""
    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in STOPWORDS]


def _is_question(text: str) -> bool:
    return text.rstrip().endswith("?")


def score_text(text: str) -> float:
    """Local importance of a piece of text (a turn or one sentence), in 0..1."""
    stripped = text.strip()
    if not stripped:
        return 0.0
    words = content_words(stripped)
    score = PRIOR + 0.07 * math.log1p(len(words))
    if _FIRST_PERSON.search(stripped):
        score += 0.10
    topics = len(set(m.lower() for m in _TOPIC.findall(stripped)))
    score += min(0.24, 0.08 * topics)
    if _NUMBER.search(stripped) or _TIME.search(stripped):
        score += 0.08
    if _NAME_MID.search(stripped):
        score += 0.06
    if _FILLER.match(stripped):
        score -= 0.12
    if _is_question(stripped):
        score -= 0.10
    return max(0.0, min(1.0, score))


def split_sentences(text: str) -> list[str]:
    """Sentences of a turn: split after . ! ? followed by whitespace."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def score_turn(text: str) -> float:
    """A turn is as important as its best sentence, plus a little for what else it says."""
    sentences = split_sentences(text) or [text]
    scores = sorted((score_text(s) for s in sentences), reverse=True)
    rest = sum(scores[1:3]) * 0.15
    return max(0.0, min(1.0, scores[0] + rest))
