"""No filler in memories: greetings and pleasantries are dropped from what local mode
extracts, and small talk is never the question a fact answers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memwell.local.demo import FACTS
from memwell.pipeline.extract import Question, TurnView, extract_local, last_question
from memwell.pipeline.filler import asks_nothing, is_filler, strip_filler

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Hi! My name is Ada Okafor.", "My name is Ada Okafor."),
        ("Hello there, I moved to Lisbon.", "I moved to Lisbon."),
        ("Thanks! How can I assist you today?", ""),
        ("Hey Ada, how are you?", ""),
        ("Great question! Rust is a language.", "Rust is a language."),
        ("Thanks for the tip about the trail.", "Thanks for the tip about the trail."),
        ("No, I live in Oslo now.", "No, I live in Oslo now."),
        ("How have you been?", "How have you been?"),
    ],
)
def test_strip_filler(text: str, kept: str) -> None:
    assert strip_filler(text) == kept


def test_filler_sentences_and_small_talk_questions() -> None:
    assert is_filler("Hi!") and is_filler("Thank you so much!") and is_filler("Hello there,")
    assert not is_filler("Hi, I'm Ada.")
    assert asks_nothing("How can I assist you today?")
    assert asks_nothing("Is there anything else I can help you with?")
    assert not asks_nothing("What did you do yesterday?")
    assert not asks_nothing("How have you been?")  # a real question: its answer needs it
    text = "Nice to meet you! How can I assist you today?"
    assert last_question(text) is None
    assert last_question("Sure. Which language do you like? Anything else you need?") == (
        "Which language do you like?"
    )


def _turn(content: str, replying_to: Question | None = None) -> TurnView:
    return TurnView("t", "1", "u", "s", "user", content, SAID, {}, replying_to)


def test_the_demo_name_is_remembered_without_its_greeting() -> None:
    [memory] = extract_local(_turn(FACTS[0]), threshold=0.15)
    assert memory.content == "The user's name is Ada Okafor."


def test_a_greeting_alone_is_no_memory() -> None:
    for text in ("Hi!", "Thanks so much!", "Hello there, how are you?", "ok thanks"):
        assert extract_local(_turn(text), threshold=0.15) == []
