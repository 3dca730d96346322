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


#: The counter used when none is configured.
DEFAULT_COUNTER: TokenCounter = EstimatingTokenCounter()


def count_tokens(text: str) -> int:
    """Estimated token count of `text` with the default counter."""
    return DEFAULT_COUNTER.count(text)
