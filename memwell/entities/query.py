"""The entity keys a search query may name, for retrieval's entity term.

Recall first, and fast (a few regular expressions, no model): a query names an entity
the way a memory does, but a question capitalises its first word ("What", "When") and
leaves out the rewriting that makes memories regular.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Final

from memwell.entities import lexicon as lx
from memwell.entities.names import normalize, owned_key


def _base(word: str) -> str:
    return word[:-2] if word.endswith("'s") else word


_QUERY_NAMES: Final = re.compile(r"[A-Z][\w'\-]*(?:\s+(?:of\s+)?[A-Z][\w'\-]*)*")
_QUERY_OWNED: Final = re.compile(
    r"\b([A-Za-z]+)'s\s+(?:(?:little|big|older|younger|best)\s+)?([a-z]+)"
)
_QUERY_WORDS: Final = re.compile(r"[a-z]+")


def query_keys(text: str) -> list[str]:
    """Entity keys a search query may name, recall first: every capitalised span (and
    its words), owned relatives and pets ("caroline's sister"), lexicon nouns, and for
    a class word ("hobbies", "pets", "instruments") every lexicon member of the class:
    a question about a user's hobbies is answered by the memories naming one.

    Names come first, so a cap on the number of keys drops class members, never names.
    """
    text = text.replace("\u2019", "'")
    keys: dict[str, None] = {}
    for m in _QUERY_NAMES.finditer(text):
        words = [_base(w) for w in m.group().split()]
        while words and words[0].lower() in lx.NOT_NAMES:
            words = words[1:]
        if not words:
            continue
        keys[normalize(" ".join(words))] = None
        if len(words) > 1:
            for word in words:
                if word.lower() not in lx.NOT_NAMES and word != "of":
                    keys[normalize(word)] = None
    for m in _QUERY_OWNED.finditer(text):
        noun = m.group(2)
        if noun in lx.KINSHIP or noun in lx.PETS:
            keys[owned_key(normalize(m.group(1)), noun)] = None
    lowered = _QUERY_WORDS.findall(text.lower())
    # Each word with the one after it (the last with ""), for two-word compounds.
    for a, b in pairwise([*lowered, ""]):
        if lx.compound_kind(a, b) is not None:
            keys[f"{a} {b}"] = None
        elif lx.noun_kind(a) is not None:
            keys[normalize(a)] = None
    for word in lowered:
        for member in sorted(lx.CLASS_MEMBERS.get(word, ())):
            keys[member] = None
    keys.pop("", None)
    return list(keys)
