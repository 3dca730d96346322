"""The patterns the local extractor (memwell/entities/extract.py) reads text with:
tokens, quoted titles, the cues that make a sentence's first word a name or a name a
place, and the verbs that state a relation."""

from __future__ import annotations

import re
from typing import Final

from memwell.entities.names import word_set

SENTENCES: Final = re.compile(r"(?<=[.!?])\s+")
TOKEN: Final = re.compile(r"[A-Za-z][A-Za-z'\-]*[A-Za-z]|[A-Za-z]|\d+|[,;:()\"]")
QUOTED: Final = re.compile(r"\"([A-Z][^\"]{1,60})\"|(?<![\w])'([A-Z][^']{1,60})'(?![\w])")
PRONOUNS: Final = frozenset({"her", "his", "their", "its"})
VERB_CUES: Final = word_set(
    "is was has had went loves love likes enjoys and said says thinks feels wants got "
    "made took did does will would can could just also really bought adopted joined "
    "started moved lives works visited attended finished found plays painted wrote ran "
    "tried shared keeps knows needs hopes plans agrees bets saw gets takes makes goes "
    "finds seems looks uses reads writes runs sees believes remembers misses wishes "
    "appreciates admires dreams prefers recommends spends gave told felt thought knew "
    "loved liked enjoyed learned"
)
#: what a preceding word (or two) must be for an uncued name to be a place
PLACE_PREPOSITIONS: Final = re.compile(
    r"(?:^|\s)(?:in|from|near|around|moved to|trip to|went to|flew to|traveled to|"
    r"travelled to|visit|visited|back to|drove to)$"
)
NOT_BEFORE_NOUN: Final = word_set("to can will would could should you we they i")
NAMED: Final = re.compile(r"^(?:named|called)$")
FIRST_NAME_ONLY: Final = re.compile(r"^[A-Z][a-z]+$")

VERB_RELATIONS: Final = [
    ("likes", re.compile(
        r"\b(?:loves?|loved|likes?|liked|enjoys?|enjoyed|adores?|adored|"
        r"(?:is|are) (?:really |also |more |so |\w+ly )?into|"
        r"(?:is|are) (?:a |also a )?(?:big |huge )?fans? of|(?:is|are) passionate about|"
        r"(?:is|are) obsessed with)\b", re.I)),
    ("owns", re.compile(r"\b(?:owns?|bought|adopted|(?:has|have|got) (?=an? |two |three |a new ))",
                        re.I)),
    ("member_of", re.compile(
        r"\b(?:joined|(?:is|are) (?:a )?members? of|(?:is|are) part of|volunteers? (?:at|with)|"
        r"plays? for)\b", re.I)),
    ("attended", re.compile(
        r"\b(?:went to|attended|visited|travel(?:l)?ed to|took (?:a|an) (?:\w+ )?trip to|"
        r"(?:was|were) at|participated in|took part in|ran (?:in )?(?:a|the)|goes to|go to)\b",
        re.I)),
]  # fmt: skip
SLOT_OBJECTS: Final = {"lives_in": "place", "works_at": "organization"}
