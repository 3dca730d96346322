"""Greetings and pleasantries: never a memory, nor part of one.

"Hi! My name is Ada." is remembered as "The user's name is Ada.", not "Hi! The user's
name is Ada.": a filler sentence is dropped, and a greeting that opens a sentence
("Hello there, I moved to Lisbon") is cut off it. An assistant's service question
("How can I assist you today?") asks nothing about the fact that answers it, so it is
never recorded as the question a reply answers (memwell/pipeline/replies.py).
Both extraction paths use these functions: local (memwell/pipeline/extract.py) and the
model's (memwell/pipeline/llm_analysis.py).
"""

from __future__ import annotations

import re
from typing import Final

from memwell.pipeline.importance import split_sentences

_GREETING: Final = (
    r"(?:hi|hey|hello|hiya|howdy|greetings|good (?:morning|afternoon|evening|night)|"
    r"bye|goodbye|see you(?: soon| later)?|take care|cheers)"
)
_THANKS: Final = r"(?:thanks?(?: a lot| so much| again)?|thank you(?: so much| again)?|thx|ty)"
_ACK: Final = (
    r"(?:ok(?:ay)?|sure|cool|great|awesome|nice|wow|lol|haha|yes|yeah|yep|no|nope|"
    r"sounds good|got it|no problem|you'?re welcome|my pleasure|of course|"
    r"great question|good question|(?:nice|pleased|good) to (?:meet|see|hear from) you)"
)
_SERVICE: Final = (
    r"(?:how (?:can|may) i (?:help|assist)(?: you)?(?: today| with (?:that|anything else))?|"
    r"what can i (?:do|help with)(?: for you)?(?: today)?|"
    r"(?:is there )?anything else (?:i can (?:help|assist) (?:you )?with|you need)|"
    r"how are you(?: doing)?(?: today)?|how'?s it going|what'?s up|"
    r"let me know if (?:you need|there'?s) anything(?: else)?|happy to help|glad to help|"
    r"i'?m here to help|hope (?:this|that) helps)"
)
_NAME: Final = r"(?:\s+(?:there|all|everyone|again|[A-Z][a-z]+))?"
_PLEASANTRY: Final = f"(?:{_GREETING}{_NAME}|{_THANKS}{_NAME}|{_ACK}|{_SERVICE})"
#: A sentence that is nothing but pleasantries ("Hi!", "Thanks so much!", "Hello there,")
_FILLER_SENTENCE: Final = re.compile(
    rf"^\W*{_PLEASANTRY}(?:[\s,.!?;:-]+{_PLEASANTRY})*[\s,.!?;:-]*$", re.I
)
#: A greeting that opens a sentence with more to say ("Hello there, I moved...")
_LEADING: Final = re.compile(rf"^\W*(?:{_GREETING}{_NAME}|{_THANKS}{_NAME})\s*[,!.:;-]+\s*", re.I)
_SERVICE_QUESTION: Final = re.compile(rf"^\W*{_SERVICE}\W*$", re.I)


def is_filler(sentence: str) -> bool:
    """True for a sentence made only of greetings, thanks and pleasantries."""
    return bool(_FILLER_SENTENCE.match(sentence.strip()))


def strip_filler(text: str) -> str:
    """`text` without its filler sentences and without a greeting opening a sentence."""
    kept: list[str] = []
    for sentence in split_sentences(text):
        if is_filler(sentence):
            continue
        rest = _LEADING.sub("", sentence, count=1)
        if rest != sentence and rest:
            rest = rest[0].upper() + rest[1:]
        if rest.strip():
            kept.append(rest.strip())
    return " ".join(kept)


def asks_nothing(question: str) -> bool:
    """True for small talk phrased as a question ("How can I assist you today?")."""
    return bool(_SERVICE_QUESTION.match(question.strip()))
