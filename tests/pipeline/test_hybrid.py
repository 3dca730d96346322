"""Hybrid mode's join of the model's memories and local mode's (plain functions)."""

from __future__ import annotations

from datetime import UTC, datetime

from memwell.pipeline.candidate import Candidate
from memwell.pipeline.hybrid import combine, content_words, message_sources, passed_over

SAID = datetime(2023, 5, 8, tzinfo=UTC)


def _cand(text: str, writer: str, sources: list[str] | None = None) -> Candidate:
    return Candidate("t", "u", "s", "fact", text, 0.5, SAID, sources or ["t2"],
                     metadata={"extractor": writer})  # fmt: skip


def test_local_memories_stay_and_the_model_adds_only_what_is_new() -> None:
    local = [_cand("Caroline made a clay bowl in class on 7 May 2023.", "local")]
    model = [
        _cand("Caroline made a clay bowl in class.", "llm"),  # says less: dropped
        _cand("Caroline enjoys pottery.", "llm"),  # an inference: kept
        _cand("Caroline enjoys pottery a lot.", "llm"),  # the same again: dropped
    ]
    assert [c.content for c in combine(model, local)] == [
        "Caroline made a clay bowl in class on 7 May 2023.",
        "Caroline enjoys pottery.",
    ]


def test_a_memory_goes_to_the_message_it_shares_words_with() -> None:
    messages = ["I adopted a puppy named Biscuit.", "I moved to Lisbon in May."]
    names = ["Caroline"]
    assert message_sources("Caroline moved to Lisbon.", 1, messages, names=names) == (2,)
    assert message_sources("Caroline adopted Biscuit.", 1, messages, names=names) == (1,)
    # shares nothing but the speaker's name: an inference, its cited message keeps it
    assert message_sources("Caroline loves dogs.", 1, messages, names=names) == (1,)
    assert content_words("Ada moved. (asked: Where?)") == {"ada", "moved"}


def test_a_memory_joining_two_messages_comes_from_both_the_cited_one_first() -> None:
    messages = [
        "I went to a LGBTQ support group yesterday and it was so powerful.",
        "The transgender stories were so inspiring! I was so happy and thankful.",
    ]
    joined = "Caroline attended an LGBTQ support group and found the transgender stories inspiring."
    assert message_sources(joined, 1, messages, names=["Caroline"]) == (1, 2)
    assert message_sources(joined, 2, messages, names=["Caroline"]) == (2, 1)
    # one word in common with another message is no join
    assert message_sources("Caroline found the support group powerful.", 1, messages) == (1,)


def test_a_memory_restating_the_assistant_goes_nowhere() -> None:
    messages = ["I prefer Rust for systems programming."]
    context = ["Rust has a robust standard library and a strong community."]
    restated = "Rust has a robust standard library."
    assert message_sources(restated, 1, messages, context=context) == ()
    assert message_sources("The user prefers Rust.", 1, messages, context=context) == (1,)


def test_a_message_the_model_passes_over_keeps_its_local_memories_ranked_lower() -> None:
    local = [_cand("Caroline would love to check them out.", "local")]
    (kept,) = passed_over(local)
    assert (kept.content, kept.importance) == (local[0].content, local[0].importance / 2)
