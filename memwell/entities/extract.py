"""Local entity extraction: who and what one memory mentions, and how they relate.

Rules over the surface of the text, no model: memories in local mode are sentences
rewritten with the speaker named ("Caroline went to an LGBTQ support group on 7 May
2023", "Melanie's kids love the dinosaur exhibit"), which is what makes rules work.

Mentions:
- capitalised spans ("Caroline", "Connected LGBTQ Activists", "University of Texas").
  A span opening a sentence counts only when the same word is capitalised elsewhere
  in the text, or a verb, "'s" + a known noun or "and others" follows it, so "Wow"
  and "Painting's fun" are not names. The kind comes from cue words (University ->
  organisation, Festival -> event, Lake -> place), a short list of well-known places,
  a preceding "in/to/from", else person;
- quoted titles ("The Lean Startup", 'Connected LGBTQ Activists'): things, or an
  organisation when a group word precedes them;
- relatives and pets hung on an owner: "Melanie's kids", "her sister" (the
  sentence's first person, else the memory's), named when a name follows ("her
  sister Ana", "a dog named Max"): the owned key becomes the name's alias;
- common nouns from a small lexicon (memwell/entities/lexicon.py): activities,
  instruments, pets, things, events and groups, compounds kept whole ("camping trip").

Relations (subject and object are keys):
- the slots of memwell/pipeline/slots.py, single-valued: lives_in and works_at point
  at a place or organisation entity, job/name/status/age/favorite_X/drives at a value;
- kinship, multi-valued: sibling, parent, child, partner, friend_of, relative;
- verbs, multi-valued: likes (loves, enjoys, is into, a fan of), owns (has a, bought,
  adopted; has_pet when the thing is a pet), member_of (joined, volunteers at),
  attended (an event) or went_to (a place or organisation).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Final

from memwell.entities import lexicon as lx
from memwell.entities import patterns as pt
from memwell.entities.names import normalize, owned_key, singular
from memwell.entities.query import query_keys
from memwell.pipeline.slots import find_slot


@dataclass(frozen=True)
class Mention:
    """An entity named in a text: its normalised key, display name and kind."""

    key: str
    name: str
    kind: str


@dataclass(frozen=True)
class RelationFact:
    """An edge stated by a text; subject and object are entity keys."""

    subject: str
    relation: str
    object: str | None
    value: str | None
    single_valued: bool


@dataclass(frozen=True)
class Extraction:
    """The mentions and relations one text states, and (alias, key) pairs it reveals
    ("caroline's sister" is "ana")."""

    mentions: tuple[Mention, ...]
    relations: tuple[RelationFact, ...]
    aliases: tuple[tuple[str, str], ...] = ()


EMPTY: Final = Extraction(mentions=(), relations=())


@dataclass
class _Found:
    """One sentence's mentions, with where they are, while it is being read."""

    spans: list[tuple[int, int, Mention]] = field(default_factory=list)
    relations: list[RelationFact] = field(default_factory=list)
    aliases: list[tuple[str, str]] = field(default_factory=list)

    def add(self, start: int, end: int, mention: Mention) -> None:
        if mention.key:
            self.spans.append((start, end, mention))

    #: named pets not yet hung on an owner: key -> the pet word ("biscuit" -> "puppy")
    pets: dict[str, str] = field(default_factory=dict)

    def subject(self, before: int | None = None, *, owned: bool = False) -> str | None:
        """The first person named (or the last before `before`); a relative known
        only through its owner ("Melanie's kids") counts when `owned`."""
        people = [
            (s, m.key)
            for s, _, m in self.spans
            if m.kind == "person"
            and (owned or "'s " not in m.key)
            and (before is None or s < before)
        ]
        if not people:
            return None
        return people[-1][1] if before is not None else people[0][1]


def _base(word: str) -> tuple[str, bool]:
    """The word without a possessive, and whether it had one."""
    if word.endswith("'s"):
        return word[:-2], True
    if word.endswith("s'"):
        return word[:-1], True
    return word, False


def _capitalised(word: str) -> bool:
    base, _ = _base(word)
    if "'" in base or ("-" in base and not base.split("-")[-1][:1].isupper()):
        return False  # a contraction ("You're") or a compound word ("Melanie-time")
    return base[:1].isupper() and base.lower() not in lx.NOT_NAMES


def _name_kind(words: list[str], before: str, possessive: bool) -> str:
    lower = [w.lower() for w in words]
    if any(w in lx.ORG_CUES for w in lower):
        return "organization"
    if any(w in lx.EVENT_CUES for w in lower[1:]) or (lower and lower[-1] in lx.EVENT_CUES):
        return "event"
    if any(w in lx.PLACE_CUES for w in lower) or any(w in lx.PLACES for w in lower):
        return "place"
    if not possessive and pt.PLACE_PREPOSITIONS.search(before):
        return "place"
    if len(words) == 1 and words[0].isupper() and len(words[0]) > 1:
        return "organization"  # an acronym
    return "person" if len(words) <= 3 else "other"


def _known_names(tokens: list[list[str]]) -> set[str]:
    """Capitalised words that open a capitalised span away from a sentence's start:
    names wherever they stand. ("Smith" in "Caroline Smith went" opens no span: it
    says nothing about "Caroline".)"""
    known: set[str] = set()
    for words in tokens:
        for before, word in zip(words, words[1:], strict=False):
            if word[:1].isupper() and _capitalised(word) and not before[:1].isupper():
                known.add(_base(word)[0])
    return known


_OF_CUES: Final = lx.ORG_CUES | lx.EVENT_CUES | lx.PLACE_CUES | {"cliffs", "isle", "lord"}
#: endings of the common words that open sentences; names rarely end so
_NOT_NAME_ENDINGS: Final = ("ing", "ly", "ness", "ment", "tion", "ence", "ance", "ity")


def _opens_a_name(words: list[str], known: set[str]) -> bool:
    """Whether a sentence's first word is a name (see the module docstring)."""
    base, possessive = _base(words[0])
    if base in known:
        return True
    if lx.noun_kind(base.lower()) or base.lower() in lx.KINSHIP:
        return False  # "Art can be...", "Painting's fun": a common noun opening
    if len(words) > 1 and _base(words[1])[0] in known:
        return False  # "Reminds Melanie of...": the name starts at the second word
    rest = 1
    while not possessive and rest < len(words) and _capitalised(words[rest]):
        base, possessive = _base(words[rest])  # "Caroline Smith started": after the name
        rest += 1
    nxt = words[rest].lower() if len(words) > rest else ""
    if possessive:
        return bool(lx.KINSHIP.get(nxt) or lx.noun_kind(nxt) or nxt in lx.KIN_MODIFIERS)
    if nxt == "and":  # "Melanie and others", "Caroline and Melanie"; not "Tons and tons"
        after = words[rest + 1] if len(words) > rest + 1 else ""
        return after.lower() == "others" or _capitalised(after)
    if base.lower().endswith(_NOT_NAME_ENDINGS):
        return False  # "Parenting is hard", "Confidence is key"
    return nxt in pt.VERB_CUES or (nxt.endswith("ed") and len(nxt) > 3)


def _sentence(text: str, known: set[str], fallback: str | None) -> _Found:
    found = _Found()
    toks = [(m.start(), m.end(), m.group()) for m in pt.TOKEN.finditer(text)]
    words = [t[2] for t in toks]
    for m in pt.QUOTED.finditer(text):
        title = m.group(1) or m.group(2)
        before = text[: m.start()].rstrip().lower()
        kind = "organization" if before.endswith(tuple(lx.ORGS)) else "thing"
        found.add(m.start(), m.end(), Mention(normalize(title), title.strip(), kind))
    quoted = [(s, e) for s, e, _ in found.spans]
    i = 0
    while i < len(toks):
        start, end, word = toks[i]
        if any(s <= start < e for s, e in quoted):
            i += 1
            continue
        if word[:1].isupper() and _capitalised(word) and (i > 0 or _opens_a_name(words, known)):
            i = _name_span(toks, i, found)
            continue
        low = word.lower()
        if low.removesuffix("'s") in lx.VOCABULARY:  # most words are none of ours: skip fast
            i = _common_noun(toks, i, found, fallback)
        else:
            i += 1
    found.spans.sort(key=lambda s: s[0])
    _slot_relation(text, found)
    _verb_relations(text, found)
    return found


def _name_span(toks: list[tuple[int, int, str]], i: int, found: _Found) -> int:
    """Read a capitalised span from token i; returns the next token's index."""
    words: list[str] = []
    j = i
    while j < len(toks):
        word = toks[j][2]
        repeated = bool(words) and _base(word)[0] == _base(words[-1])[0]  # "Jon Jon's"
        if word[:1].isupper() and _capitalised(word) and not repeated:
            words.append(word)
            j += 1
            if _base(word)[1]:
                break
            continue
        cued = bool(words) and words[-1].lower() in _OF_CUES  # "University of Texas"
        if word == "of" and cued and j + 1 < len(toks) and _capitalised(toks[j + 1][2]):
            words.append(word)
            j += 1
            continue
        break
    names = [_base(w)[0] for w in words]
    name = " ".join(names)
    before = " ".join(t[2].lower() for t in toks[max(0, i - 2) : i])
    kind = _name_kind(names, before, _base(words[-1])[1])
    found.add(toks[i][0], toks[j - 1][1], Mention(normalize(name), name, kind))
    return j


def _owner(
    toks: list[tuple[int, int, str]], i: int, found: _Found, fallback: str | None
) -> str | None:
    """Whose the noun at token i is: a possessive name or a pronoun before it."""
    k = i - 1
    if k >= 0 and toks[k][2].lower() in lx.KIN_MODIFIERS:
        k -= 1
    if k < 0:
        return None
    word = toks[k][2]
    if word == "and" and k > 0 and toks[k - 1][2].lower() in lx.KINSHIP:
        return _owner(toks, k - 1, found, fallback)  # "Melanie's husband and kids"
    base, possessive = _base(word)
    if possessive and word[:1].isupper() and base.lower() not in lx.NOT_NAMES:
        return normalize(base)
    if word.lower() in pt.PRONOUNS:
        return found.subject(before=toks[k][0]) or fallback
    return None


def _follower_name(toks: list[tuple[int, int, str]], j: int) -> tuple[str, int] | None:
    """A name right after a noun ("sister Ana", "sister, Ana", "dog named Max")."""
    if j < len(toks) and (toks[j][2] == "," or pt.NAMED.match(toks[j][2])):
        j += 1
    if j < len(toks) and pt.FIRST_NAME_ONLY.match(toks[j][2]) and _capitalised(toks[j][2]):
        return toks[j][2], j
    return None


def _common_noun(
    toks: list[tuple[int, int, str]], i: int, found: _Found, fallback: str | None
) -> int:
    """A kinship word, pet or lexicon noun at token i; returns the next token's index."""
    start, end, word = toks[i]
    low = _base(word.lower())[0]
    if lx.noun_kind(low) is None and low not in lx.KINSHIP:
        low = singular(low)  # "all dances": the lexicon holds the singular
    if i > 0 and toks[i - 1][2].lower() in pt.NOT_BEFORE_NOUN:
        return i + 1  # "to show", "can race": a verb
    nxt = toks[i + 1][2].lower() if i + 1 < len(toks) else ""
    compound = lx.compound_kind(low, nxt)
    if compound is not None:
        phrase = f"{low} {nxt}"
        found.add(start, toks[i + 1][1], Mention(normalize(phrase), phrase, compound))
        return i + 2
    relation = lx.KINSHIP.get(low)
    is_pet = low in lx.PETS
    if relation is None and not is_pet:
        kind = lx.noun_kind(low)
        if kind is not None:
            found.add(start, end, Mention(normalize(low), low, kind))
        return i + 1
    owner = _owner(toks, i, found, fallback)
    named = _follower_name(toks, i + 1)
    if owner is None and named is None:
        if is_pet and low not in ("pet", "pets"):
            found.add(start, end, Mention(normalize(low), low, "thing"))
        return i + 1
    kind = "thing" if is_pet else "person"
    if named is not None:
        name, j = named
        mention = Mention(normalize(name), name, kind)
        found.add(start, toks[j][1], mention)
        if owner is not None:
            found.aliases.append((owned_key(owner, low), mention.key))
        elif is_pet:
            found.pets[mention.key] = low
        after = j + 1
    else:
        assert owner is not None
        mention = Mention(owned_key(owner, low), f"{owner.title()}'s {low}", kind)
        found.add(start, end, mention)
        after = i + 1
    if owner is not None:
        rel = "has_pet" if is_pet else str(relation)
        found.relations.append(RelationFact(owner, rel, mention.key, None, False))
    return after


def _slot_relation(text: str, found: _Found) -> None:
    slot = find_slot(text)
    if slot is None:
        return
    subject = normalize(slot.subject)
    keys = {m.key for _, _, m in found.spans}
    if subject not in keys and subject != "user":
        # "her husband tom works at ...": the name the subject phrase ends with
        ending = [k for k in keys if slot.subject.endswith(" " + k)]
        if not ending:
            return
        subject = max(ending, key=len)
    kind = pt.SLOT_OBJECTS.get(slot.relation)
    if kind is None:
        found.relations.append(RelationFact(subject, slot.relation, None, slot.value, True))
        return
    at = text.lower().rfind(slot.value)
    named = next((m for s, _, m in found.spans if s == at), None)
    if named is not None:  # "Lisbon in October": the name, not the slot's whole value
        found.spans = [sp for sp in found.spans if sp[0] != at]
        name = named.name
    else:
        name = text[at : at + len(slot.value)] if at >= 0 else slot.value
    obj = Mention(normalize(name), name, kind)
    found.spans = [s for s in found.spans if s[2].key != obj.key]
    found.add(max(at, 0), max(at, 0) + len(name), obj)
    found.relations.append(RelationFact(subject, slot.relation, obj.key, None, True))


def _verb_relations(text: str, found: _Found) -> None:
    if len(found.spans) < 2:
        return  # a relation needs a subject and a target
    for relation, pattern in pt.VERB_RELATIONS:
        for m in pattern.finditer(text):
            subject = found.subject(before=m.start(), owned=True)
            clause_end = _clause_end(text, m.end())
            target = next(
                (mt for s, _, mt in found.spans if m.end() <= s < clause_end and mt.key != subject),
                None,
            )
            if subject is None or target is None or target.kind == "person":
                continue
            rel = relation
            if relation == "owns" and target.key in lx.PETS:
                # "Caroline adopted a puppy": her puppy, not every puppy of the user's
                rel, target = (
                    "has_pet",
                    Mention(owned_key(subject, target.key), target.name, "thing"),
                )
                generic = target.key.split("'s ")[-1]
                found.spans = [(s, e, target if t.key == generic else t) for s, e, t in found.spans]
            elif relation == "owns" and target.key in found.pets:
                rel = "has_pet"  # "adopted a puppy named Biscuit"
                found.aliases.append((owned_key(subject, found.pets[target.key]), target.key))
            elif relation == "attended" and target.kind != "event":
                rel = "went_to"
            found.relations.append(RelationFact(subject, rel, target.key, None, False))


def _clause_end(text: str, at: int) -> int:
    m = re.compile(r"[.;!?]| but | and then ").search(text, at)
    return m.start() if m else len(text)


@functools.lru_cache(maxsize=4096)
def extract(text: str) -> Extraction:
    """The entities and relations one memory's text states."""
    text = text.replace("’", "'").replace("‘", "'")
    sentences = [s for s in pt.SENTENCES.split(text) if s.strip()]
    tokens = [pt.TOKEN.findall(s) for s in sentences]
    known = _known_names(tokens)
    mentions: dict[str, Mention] = {}
    relations: dict[tuple[str, str, str | None, str | None], RelationFact] = {}
    aliases: dict[str, str] = {}
    fallback: str | None = None
    for sentence in sentences:
        found = _sentence(sentence, known, fallback)
        fallback = fallback or found.subject()
        for _, _, mention in found.spans:
            mentions.setdefault(mention.key, mention)
        for r in found.relations:
            relations.setdefault((r.subject, r.relation, r.object, r.value), r)
        for alias, key in found.aliases:
            if alias != key:
                aliases.setdefault(alias, key)
    return Extraction(
        mentions=tuple(mentions.values()),
        relations=tuple(relations.values()),
        aliases=tuple(aliases.items()),
    )


__all__ = ["EMPTY", "Extraction", "Mention", "RelationFact", "extract", "query_keys"]
