"""The one rule for text Memwell stores or puts in a prompt, whoever wrote it: a person
at a door (memwell/intake/turns.py `check_text`) or a model answering the pipeline
(memwell/llm/output_rules.py). Both refuse the same characters, so nothing the doors
keep out can come in through a model's answer.

Refused:
- NUL: Postgres text cannot hold it.
- C0 controls and DEL, less tab, line feed and carriage return: no text a person
  writes holds them, and a terminal or a log viewer acts on them (ESC starts a colour
  or cursor sequence, BEL rings).
- Bidirectional embeddings, overrides and isolates (U+202A..U+202E, U+2066..U+2069):
  invisible, they make a viewer show text in another order than it is stored (the
  "Trojan Source" trick); right-to-left text needs none of them to read correctly.
- Lone surrogates: JSON can carry them (\\ud800), UTF-8 cannot.
- Blank text.
"""

from __future__ import annotations

import re
from typing import Final

_CONTROL: Final = re.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BIDI: Final = re.compile(r"[\u202a-\u202e\u2066-\u2069]")
#: Every character the rule refuses, for the one place that mends text instead of
#: refusing it: a chat reply the user has already seen (memwell/chat/exchange.py).
REFUSED_CHARACTERS: Final = re.compile(
    r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\u202a-\u202e\u2066-\u2069]"
)


def is_utf8_text(value: str) -> bool:
    """False for lone surrogates (JSON can carry them as \\ud800; UTF-8 cannot)."""
    if value.isascii():  # the common case, answered without encoding
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def text_problem(value: str, what: str = "text") -> str | None:
    """Why `value` may not be stored (never quoting it), or None when it may."""
    if "\x00" in value:
        return f"{what} must not contain NUL bytes"
    if (control := _CONTROL.search(value)) is not None:
        return (
            f"{what} must not contain control characters "
            f"(U+{ord(control.group()):04X} at {control.start()})"
        )
    if not value.strip():
        return f"{what} must not be blank"
    if not is_utf8_text(value):
        return f"{what} must be valid Unicode text (no lone surrogates)"
    if (bidi := _BIDI.search(value)) is not None:
        return (
            f"{what} must not contain bidirectional control characters "
            f"(U+{ord(bidi.group()):04X} at {bidi.start()})"
        )
    return None
