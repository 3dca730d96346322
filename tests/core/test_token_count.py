"""The token estimate's fast paths (ASCII text in a few bytes passes; text with a few
non-ASCII characters chunk by chunk) give exactly the piece-by-piece count."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memwell.core.tokens import _count_pieces, count_tokens

# Where they could part: apostrophes next to the letters of contractions (either case,
# and the long s that matches "s" case-insensitively), symbol runs, underscores, digits
# after single spaces, every kind of whitespace (ASCII and not), letters and digits of
# other scripts, combining marks, emoji.
TRICKY = (
    "sSdDmMtTlLvVeErRxX09 '\"_.,!-\t\n\x0b\x1c\x1f\x00"
    "\u00a0\u2003\u017f\u00e9\u0301\u00b2\u0660\u4e2d\U0001f31f"
)


@settings(max_examples=3000)
@given(st.text(alphabet=TRICKY, max_size=60))
def test_tricky_text_counts_as_piece_by_piece(text: str) -> None:
    assert count_tokens(text) == _count_pieces(text)


@settings(max_examples=1000)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=200))
def test_any_ascii_counts_as_piece_by_piece(text: str) -> None:
    assert count_tokens(text) == _count_pieces(text)


@settings(max_examples=1000)
@given(st.text(max_size=200))
def test_any_text_counts_as_piece_by_piece(text: str) -> None:
    assert count_tokens(text) == _count_pieces(text)


def test_prose_with_contractions_and_a_few_other_characters() -> None:
    prose = "It's Caroline's 3rd try; they'll say we've 'd' and '99. Isn't it __init__? " * 20
    assert count_tokens(prose) == _count_pieces(prose)
    mixed = prose[:700] + " – café 🌟 " + prose[700:] + "\u00a0end"
    assert count_tokens(mixed) == _count_pieces(mixed)
    assert count_tokens("") == 0


@settings(max_examples=500)
@given(
    st.text(alphabet=st.characters(max_codepoint=127), min_size=100, max_size=300),
    st.lists(st.tuples(st.integers(0, 300), st.characters(min_codepoint=128)), max_size=4),
)
def test_ascii_with_a_few_other_characters_counts_as_piece_by_piece(
    text: str, inserts: list[tuple[int, str]]
) -> None:
    for at, char in inserts:
        text = text[:at] + char + text[at:]
    assert count_tokens(text) == _count_pieces(text)
