"""Entity names to keys, and the alias rules that make two names one entity.

A key is what an entity is found by: the name lowercased, typographic apostrophes
made plain, a trailing possessive ("Caroline's" -> "caroline") and leading articles
and determiners ("the", "a", "her", ...) dropped, punctuation turned to spaces, and a
common noun's last word made singular ("the kids" -> "kid"). Proper names keep their
number ("Connected LGBTQ Activists" stays plural): only a lowercase last word is a
common noun.

Relatives and possessions without a name of their own are keyed by their owner:
"Caroline's sister" and "her sister" (in a memory about Caroline) are both
`caroline's sister` (`owned_key`). The owner is the key of the person the phrase
hangs on, so two people's sisters never collide; "her" is resolved by the extractor
to the memory's subject (memwell/entities/extract.py), never across memories.

Aliases (`aliases_of`), each pointing at exactly one entity of a user:
- every entity's own key, so that any name a query carries resolves by one lookup
  in `entity_aliases`;
- a person's first name alone, when the key has more than one word: "caroline"
  for "caroline smith". Nicknames ("Mel" for "Melanie") are not derivable and are
  not guessed; a first name shared by two known people stays with the first;
- the owned key of a relative or pet that turns out to have a name: "Caroline's
  sister Ana" makes `caroline's sister` an alias of `ana`, and an entity already
  stored under `caroline's sister` is merged into `ana` (memwell/entities/store.py).
"""

from __future__ import annotations

import functools
import re
from typing import Final


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of `text`: word lists stay readable in the source."""
    return frozenset(text.split())


DETERMINERS: Final = word_set(
    "the a an this that these those some his her their its my your our another"
)
_POSSESSIVE: Final = re.compile(r"(?:'s|s')$")
_PUNCT: Final = re.compile(r"[^\w\s']+")
_SPACES: Final = re.compile(r"\s+")
_IRREGULAR_PLURALS: Final = {
    "children": "child",
    "kids": "kid",
    "people": "person",
    "men": "man",
    "women": "woman",
    "mice": "mouse",
    "geese": "goose",
    "feet": "foot",
    "teeth": "tooth",
    "parents": "parent",
    "grandparents": "grandparent",
    "series": "series",
    "species": "species",
    "news": "news",
    "glasses": "glasses",
    "clothes": "clothes",
    "sports": "sports",
    "drums": "drums",
    "games": "game",
}
#: words ending in s that are not plurals
_NOT_PLURAL: Final = word_set(
    "bus gas yes this his its plus chess class glass dress boss lens tennis "
    "christmas canvas atlas pancreas status campus virus bonus focus chorus circus "
    "gymnastics athletics physics mathematics politics economics aerobics"
)


def singular(word: str) -> str:
    """A common noun's singular, by simple English rules ("puppies" -> "puppy")."""
    if word in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[word]
    if len(word) < 4 or word in _NOT_PLURAL or word.endswith(("ss", "us", "is", "'s")):
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses", "zes")):
        return word[:-2]
    if word.endswith("s"):
        return word[:-1]
    return word


@functools.lru_cache(maxsize=16384)
def normalize(name: str) -> str:
    """The key of a name: see the module docstring."""
    text = name.replace("’", "'").replace("‘", "'").strip().strip("\"'")
    words = _SPACES.split(_PUNCT.sub(" ", text).strip())
    while len(words) > 1 and words[0].lower() in DETERMINERS:
        words = words[1:]
    if not words or not words[0]:
        return ""
    words[-1] = _POSSESSIVE.sub("", words[-1])
    last = words[-1]
    if last and last.islower():
        words[-1] = singular(last)
    key = " ".join(w for w in words if w).lower()
    return key.strip("' ")


def owned_key(owner: str, thing: str) -> str:
    """The key of something known only through its owner: ("caroline", "sister") ->
    "caroline's sister"."""
    return f"{owner}'s {normalize(thing)}"


def first_name(key: str) -> str | None:
    """The first-name alias of a person's multi-word key, or None."""
    if "'s " in key:
        return None
    parts = key.split(" ")
    if len(parts) < 2 or len(parts[0]) < 2:
        return None
    return parts[0]


def aliases_of(key: str, kind: str) -> tuple[str, ...]:
    """The aliases an entity gets by rule: its key, and a person's first name."""
    first = first_name(key) if kind == "person" else None
    return (key, first) if first else (key,)
