"""Retrieval metrics beside R@k that R@k can flatter or miss.

- `one_credit_recall`: recall at k where each hit may credit at most one evidence turn.
  A memory built from several turns (a summary, a merged fact) covers several evidence
  ids at once; plain R@k counts them all, this counts the best one-to-one matching of
  hits to evidence turns, so ten hits can never cover more than ten turns.
- `containment`: the share of the gold answer's content words (lowercased alphanumeric
  tokens minus a small stopword list) present in the text of the top k. It asks
  whether the answer can be read off what was retrieved, whatever turn ids it carries.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

_TOKEN: Final = re.compile(r"[a-z0-9]+")
# Function words a gold answer shares with any text; kept small on purpose, since
# "not", "no" or a number can be the answer.
_STOPWORD_TEXT: Final = """a an the and or but of to in on at for with by from as is are was
were be been being it its this that these those he she they them his her their i you we my
your our me us do does did so than then there here what which who whom when where why how
all any some about into over after before"""
STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())


def content_words(text: str) -> set[str]:
    """Lowercased alphanumeric tokens of `text`, minus stopwords."""
    return {t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS}


def containment(answer: str, retrieved: Sequence[str]) -> float | None:
    """The share of the answer's content words found in the retrieved text; None when
    the answer has none (nothing to find)."""
    wanted = content_words(answer)
    if not wanted:
        return None
    found = set().union(*(content_words(t) for t in retrieved)) if retrieved else set()
    return len(wanted & found) / len(wanted)


def one_credit_recall(evidence: frozenset[str], ranked: Sequence[set[str]], k: int) -> float:
    """Recall at k where each hit credits at most one evidence turn (a maximum bipartite
    matching of hits to the evidence ids they carry)."""
    matched: dict[str, int] = {}  # evidence id -> hit index

    def augment(hit: int, seen: set[str]) -> bool:
        for turn in ranked[hit] & evidence:
            if turn in seen:
                continue
            seen.add(turn)
            if turn not in matched or augment(matched[turn], seen):
                matched[turn] = hit
                return True
        return False

    for hit in range(min(k, len(ranked))):
        augment(hit, set())
    return len(matched) / len(evidence) if evidence else 0.0
