"""Text normalisation shared by dedup and hashing."""

from __future__ import annotations

import hashlib
import re
import unicodedata

_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = re.compile(r"^[\s\"'`.,;:!?]+|[\s\"'`.,;:!?]+$")


def normalize(text: str) -> str:
    """Case-, width- and whitespace-insensitive form: "I like tea!" == "i like  tea"."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _EDGE_PUNCT.sub("", _SPACE.sub(" ", folded))


def content_hash(text: str) -> str:
    """The exact-dedup key of a memory's content."""
    return hashlib.sha256(normalize(text).encode("utf-8")).hexdigest()
