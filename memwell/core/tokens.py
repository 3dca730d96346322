"""Token counting for budgets on the chat path.

The short-term buffer keeps "the last N tokens" of a session, so every turn needs a
token count when it is appended. Exact counts need the model's tokenizer, and real BPE
tokenizers (tiktoken's cl100k_base / o200k_base) need a vocabulary file that is
downloaded on first use. That download is exactly what must not happen on an
air-gapped box or in the middle of a request, so this module ships a dependency-free
estimate. It is what we degrade to, the way redis/agent-memory-server falls back to a
character heuristic when tiktoken is unavailable. Anything with a `count` method can be
plugged in instead (see `TokenCounter`), e.g. a tiktoken adapter where the vocabulary
is available.
"""

from __future__ import annotations

import math
import re
from typing import Protocol

__all__ = [
    "DEFAULT_COUNTER",
    "EstimatingTokenCounter",
    "TokenCounter",
    "count_tokens",
]


class TokenCounter(Protocol):
    """Counts the tokens a model would see for `text`."""

    def count(self, text: str) -> int: ...


# Mirrors the split that cl100k's pre-tokenizer makes before BPE runs: English
# contractions, letter runs, digit runs, whitespace runs and symbol runs. Together the
# alternatives match every character, so no input is ever skipped.
_PIECE = re.compile(
    r"""(?P<contraction>'(?i:[sdmt]|ll|ve|re))"""
    r"""|(?P<letters>[^\W\d_]+)"""
    r"""|(?P<digits>\d+)"""
    r"""|(?P<space>\s+)"""
    r"""|(?P<symbols>(?:[^\w\s]|_)+)"""
)

# cl100k keeps almost every common English word (with its leading space) as one token
# and splits rarer ones every 3-4 letters; 7 letters per token sits between the two.
_ASCII_LETTERS_PER_TOKEN = 7
# Latin-with-accents, Greek, Cyrillic, Hebrew, Arabic: merged less often than English.
_ALPHABET_LETTERS_PER_TOKEN = 3
# From U+0900 on (Indic, Thai, CJK, kana, Hangul, ...) cl100k is close to one token
# per character, often more for rare ideographs.
_DENSE_SCRIPT_START = 0x0900
# cl100k merges frequent symbol pairs such as `{"`, `":`, `),` and `...`.
_ASCII_SYMBOLS_PER_TOKEN = 2
# Emoji and other astral-plane characters are 4 UTF-8 bytes: usually 2-3 byte tokens.
_ASTRAL_SYMBOL_TOKENS = 2
# Long whitespace runs (indentation, blank lines) have dedicated tokens up to a length.
_SPACES_PER_TOKEN = 16


def _letter_tokens(run: str) -> int:
    if run.isascii():
        return math.ceil(len(run) / _ASCII_LETTERS_PER_TOKEN)
    ascii_n = alphabet_n = dense_n = 0
    for ch in run:
        code = ord(ch)
        if code < 0x80:
            ascii_n += 1
        elif code < _DENSE_SCRIPT_START:
            alphabet_n += 1
        else:
            dense_n += 1
    estimate = (
        ascii_n / _ASCII_LETTERS_PER_TOKEN + alphabet_n / _ALPHABET_LETTERS_PER_TOKEN + dense_n
    )
    return max(1, math.ceil(estimate))


def _symbol_tokens(run: str) -> int:
    if run.isascii():
        return math.ceil(len(run) / _ASCII_SYMBOLS_PER_TOKEN)
    ascii_n = 0
    other = 0
    for ch in run:
        code = ord(ch)
        if code < 0x80:
            ascii_n += 1
        else:
            other += _ASTRAL_SYMBOL_TOKENS if code > 0xFFFF else 1
    return math.ceil(ascii_n / _ASCII_SYMBOLS_PER_TOKEN) + other


def _space_tokens(run: str, next_char: str) -> int:
    # A single space before a word or a symbol is folded into that token (" the", " {").
    # Before a digit it is not: cl100k encodes "at 3" as " at", " ", "3".
    if run == " " and next_char and not next_char.isdigit():
        return 0
    return 1 + (len(run) - 1) // _SPACES_PER_TOKEN


class EstimatingTokenCounter:
    """A fast, dependency-free estimate of OpenAI-style BPE (cl100k) token counts.

    The text is split the way cl100k's pre-tokenizer splits it, then each piece is
    priced:

    - an English contraction ("'s", "'ll", ...): 1 token;
    - an ASCII letter run: ceil(len / 7), so every word is at least 1 token;
    - a letter run in another script: 1/3 token per letter for Latin-with-accents,
      Greek, Cyrillic, Hebrew and Arabic, 1 token per character from U+0900 on
      (Indic, Thai, CJK, kana, Hangul), at least 1 per run;
    - a digit run: ceil(len / 3) (cl100k groups digits in threes);
    - a symbol run: ceil(len / 2) for ASCII punctuation, 1 per other symbol and 2 per
      emoji / astral-plane character;
    - whitespace: a single space before a word or symbol is free (it belongs to the
      next token); any other run costs 1 token, plus 1 per further 16 characters.

    Expected error against cl100k: English prose within about +/-20%, biased slightly
    high because long common words are single tokens in cl100k. Rare vocabulary and
    code identifiers are undercounted by up to about 30-40% (BPE splits them every
    3-4 letters). CJK is within about +/-30%; emoji and combining sequences are rough.
    The bias toward overcounting prose is the safe direction for a context budget.

    Total: never raises on any `str` (empty, NUL, emoji, lone surrogates).
    """

    def count(self, text: str) -> int:
        if text.isascii():
            return _count_ascii(text)
        return _count_mixed(text)


def _count_pieces(text: str) -> int:
    """The estimate, piece by piece (any text)."""
    total = 0
    for match in _PIECE.finditer(text):
        piece = match.group()
        kind = match.lastgroup
        if kind == "letters":
            total += _letter_tokens(piece)
        elif kind == "space":
            total += _space_tokens(piece, text[match.end() : match.end() + 1])
        elif kind == "symbols":
            total += _symbol_tokens(piece)
        elif kind == "digits":
            total += math.ceil(len(piece) / 3)
        else:  # contraction
            total += 1
    return total


# The same estimate for ASCII text (nearly every prompt) without a Python step per
# piece (3 kB of context cost 2 ms that way): in ASCII each kind of piece is a maximal
# run of its own class of characters, so with the text mapped to one class at a time,
# bytes methods count the runs and the tokens past each run's first. Two exceptions
# are settled apart: a single space before a non-digit is free, and a contraction
# ("'s", "'ll") takes its letters from the letter run after it (its apostrophe, a
# one-character symbol run, costs the 1 token a contraction costs).
def _class_table(pattern: str) -> bytes:
    member = re.compile(pattern)
    return bytes(ord("x") if member.fullmatch(chr(c)) else ord("-") for c in range(256))


_LETTER = _class_table(r"[^\W\d_]")
_DIGIT = _class_table(r"\d")
_SPACE = _class_table(r"\s")
_SYMBOL = _class_table(r"[^\w\s]|_")
# For the free spaces: the space itself, other whitespace, digits, anything else.
_SPACING = bytes(
    ord(" ") if c == ord(" ") else ord("w") if space == ord("x") else ord("0") if digit == ord("x")
    else ord("x")
    for c, space, digit in zip(range(256), _SPACE, _DIGIT, strict=True)
)  # fmt: skip
_CONTRACTION_ONE = frozenset("sdmt")
_CONTRACTION_TWO = frozenset(("ll", "ve", "re"))


def _run_tokens(classes: bytes, per_token: int) -> int:
    """Sum of ceil(len / per_token) over the runs of x in `classes`."""
    marked = b"-" + classes
    runs = marked.count(b"-x")
    # ceil(n / k) = 1 + floor((n - 1) / k): drop each run's first character, count the rest.
    return runs + marked.replace(b"-x", b"--").count(b"x" * per_token)


def _count_ascii(text: str) -> int:
    raw = text.encode("ascii")
    letters = raw.translate(_LETTER)
    spacing = raw.translate(_SPACING)
    total = (
        _run_tokens(letters, _ASCII_LETTERS_PER_TOKEN)
        + _run_tokens(raw.translate(_DIGIT), 3)
        + _run_tokens(raw.translate(_SYMBOL), _ASCII_SYMBOLS_PER_TOKEN)
        + _run_tokens(raw.translate(_SPACE), _SPACES_PER_TOKEN)
        - (spacing.count(b" x") - spacing.count(b"  x") - spacing.count(b"w x"))
    )
    at = text.find("'")
    while at >= 0:
        total += _contraction_change(text, letters, at)
        at = text.find("'", at + 1)
    return total


def _contraction_change(text: str, letters: bytes, at: int) -> int:
    """What a contraction at `at` changes in the letter tokens (0: none there)."""
    if at > 0 and _SYMBOL[ord(text[at - 1])] == ord("x"):
        return 0  # the apostrophe belongs to the symbol run going on
    if text[at + 1 : at + 2].lower() in _CONTRACTION_ONE:
        taken = 1
    elif text[at + 1 : at + 3].lower() in _CONTRACTION_TWO:
        taken = 2
    else:
        return 0
    end = letters.find(b"-", at + 1)
    run = (len(letters) if end < 0 else end) - (at + 1)
    per = _ASCII_LETTERS_PER_TOKEN
    return math.ceil((run - taken) / per) - math.ceil(run / per)


# Text with a few non-ASCII characters (a dash, an emoji) in it: the chunks that hold
# them piece by piece, the rest in one ASCII pass. A chunk, a whitespace run and the
# non-space run after it, prices the same alone as inside its text: no piece spans
# whitespace, and a whitespace run's price depends only on the character after it.
_ASCII_BYTES = bytes(range(128))


def _count_mixed(text: str) -> int:
    chunks = set()
    others = text.encode("utf-8", "surrogatepass").translate(None, _ASCII_BYTES)
    if len(others) * 8 > len(text):  # not a few: chunks would be most of the text
        return _count_pieces(text)
    for char in set(others.decode("utf-8", "surrogatepass")):
        at = text.find(char)
        while at >= 0:
            chunks.add(_chunk_around(text, at))
            at = text.find(char, at + 1)
    rest: list[str] = []
    total = last = 0
    for start, end in sorted(chunks):  # chunks never overlap: each is one or disjoint
        rest.append(text[last:start])
        total += _count_pieces(text[start:end])
        last = end
    rest.append(text[last:])
    return total + _count_ascii("".join(rest))


def _chunk_around(text: str, at: int) -> tuple[int, int]:
    """The chunk holding position `at`: (start, end)."""
    start = end = at
    if not text[at].isspace():
        while start > 0 and not text[start - 1].isspace():
            start -= 1
    while start > 0 and text[start - 1].isspace():
        start -= 1
    while end < len(text) and text[end].isspace():
        end += 1
    while end < len(text) and not text[end].isspace():
        end += 1
    return start, end


#: The counter used when none is configured.
DEFAULT_COUNTER: TokenCounter = EstimatingTokenCounter()


def count_tokens(text: str) -> int:
    """Estimated token count of `text` with the default counter."""
    return DEFAULT_COUNTER.count(text)
