"""The local supersession rule: a changed fact about the same subject.

Some facts hold one value at a time: where someone lives, where they work, what their
job is, their favourite X, their name, their relationship status, their age. A slot
is (subject, relation); its value is what follows. When a new memory fills the same
slot as a live one with a different value, the new one supersedes the old one:
"Ada lives in Berlin" is superseded by "Ada moved to Lisbon".

The subject is the text before the relation's verb (normalised), so "Ada's sister
lives in Rome" never supersedes "Ada lives in Berlin". Anything these patterns do
not recognise is not a slot, and is never superseded in local mode (it is added or
merged instead): a missed supersession keeps both facts, a wrong one hides a true
fact, and the first is the cheaper mistake.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Final

_VALUE: Final = r"(?P<value>[^.,;!?]+)"
_RELATIONS: Final[list[tuple[str, re.Pattern[str]]]] = [
    ("lives_in", re.compile(
        r"\b(?:now )?(?:lives?|is living|moved|has moved|relocated|is based|is moving)"
        r" (?:in|to) " + _VALUE, re.I)),
    ("works_at", re.compile(
        r"\b(?:works?|is working|is employed|got a (?:new )?job|started (?:a new job|working))"
        r" (?:at|for) " + _VALUE, re.I)),
    ("job", re.compile(r"\b(?:works?|is working) as (?:an? )?" + _VALUE, re.I)),
    ("favorite", re.compile(r"\bfavou?rite (?P<what>\w+(?: \w+)?) is " + _VALUE, re.I)),
    ("name", re.compile(r"\bname is " + _VALUE, re.I)),
    ("status", re.compile(
        r"\bis (?:now )?(?P<value>married|single|engaged|divorced|separated|widowed)\b", re.I)),
    ("age", re.compile(r"\bis (?P<value>\d+)(?: years old| now)\b", re.I)),
    ("drives", re.compile(r"\b(?:drives|now drives) (?:an? )?" + _VALUE, re.I)),
]  # fmt: skip
# Qualifiers that are not part of the value: "Lisbon in October 2023", "Berlin with Sam".
_TRAILING: Final = re.compile(
    r"\s*\b(?:now|too|also|since .*|on \d.*|on the .*|in the week.*|in (?:[a-z]+ )?\d{4}.*|"
    r"with .*|for .*|because .*|and .*|but .*)$",
    re.I,
)


@dataclass(frozen=True)
class Slot:
    subject: str
    relation: str
    value: str


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower().replace("’", "'"))


# Reconcile asks about the same few neighbour texts for every candidate of a batch
# (measured: 40 calls per candidate, a fifth of reconcile's time); the answer depends
# on the text alone, and a Slot is immutable, so remembering it is safe.
@functools.lru_cache(maxsize=8192)
def find_slot(sentence: str) -> Slot | None:
    """The single-valued fact this sentence states, if it states one we recognise."""
    for relation, pattern in _RELATIONS:
        m = pattern.search(sentence)
        if m is None:
            continue
        subject = _norm(sentence[: m.start()])
        subject = re.sub(r"\b(?:has|have|had|just|recently|finally|now)\b", "", subject).strip()
        if relation == "favorite":
            # "Ada's favourite colour is blue": the subject owns the favourite.
            subject = subject.removesuffix("'s").strip()
            relation = f"favorite_{_norm(m.group('what'))}"
        subject = subject.removesuffix("'s")
        value = _TRAILING.sub("", _norm(m.group("value"))).strip()
        if subject and value:
            return Slot(subject=subject, relation=relation, value=value)
    return None


def supersedes(new: str, old: str) -> Slot | None:
    """The slot whose value `new` changes relative to `old`, or None."""
    a, b = find_slot(new), find_slot(old)
    if a is None or b is None:
        return None
    if (a.subject, a.relation) != (b.subject, b.relation) or a.value == b.value:
        return None
    return a
