"""Each local-mode pipeline step as a plain function: importance, standalone rewriting,
extraction, the merge decision and its fact guard, the supersession rule, summaries."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from memwell.core.tokens import count_tokens
from memwell.pipeline.dedup import decide_merge, fact_guard
from memwell.pipeline.extract import Question, TurnView, extract_local, last_question
from memwell.pipeline.importance import score_turn
from memwell.pipeline.rewrite import resolve_dates, standalone
from memwell.pipeline.slots import find_slot, supersedes
from memwell.pipeline.summarize import LocalSummarizer

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def _turn(content: str, *, speaker: str | None = "Caroline", role: str = "user") -> TurnView:
    return TurnView(
        tenant="t",
        turn_id="D1:3",
        user_id="u",
        session_id="s",
        role=role,
        content=content,
        created_at=SAID,
        metadata={"speaker": speaker} if speaker else {},
    )


def test_importance_ranks_life_events_above_filler() -> None:
    event = score_turn("I went to a LGBTQ support group yesterday and it was so powerful.")
    plan = score_turn("We're thinking about going camping with the kids next month.")
    filler = score_turn("Haha, thanks! Talk soon.")
    question = score_turn("How have you been?")
    assert min(event, plan) > 0.45 > max(filler, question)
    assert 0.0 <= filler <= 1.0 and 0.0 <= event <= 1.0


def test_standalone_names_the_speaker_and_resolves_the_date() -> None:
    text, dated = standalone("I went to a support group yesterday.", speaker="Caroline", when=SAID)
    assert text == "Caroline went to a support group on 7 May 2023."
    assert dated
    assert standalone("I'm keen on my studies.", speaker="Mel", when=SAID)[0] == (
        "Mel is keen on Mel's studies."
    )


def test_relative_dates() -> None:
    assert resolve_dates("last month", SAID)[0] == "in April 2023"
    assert resolve_dates("last year", SAID)[0] == "in 2022"
    assert resolve_dates("two weeks ago", SAID)[0] == "in the week of 24 April 2023"
    assert resolve_dates("last Friday", SAID)[0] == "on 5 May 2023"  # 8 May 2023 is a Monday
    assert resolve_dates("no date here", SAID) == ("no date here", False)


def test_extraction_keeps_statements_with_provenance_and_drops_questions() -> None:
    turn = _turn(
        "I went to a LGBTQ support group yesterday and it was so powerful. "
        "Have you ever been to one?"
    )
    [memory] = extract_local(turn, threshold=0.35)
    assert memory.content == (
        "Caroline went to a LGBTQ support group on 7 May 2023 and it was so powerful."
    )
    assert memory.kind == "event"
    assert memory.source_turn_ids == ["D1:3"]
    assert memory.metadata["speaker"] == "Caroline"
    assert extract_local(_turn("Hey! How are you?"), threshold=0.35) == []


def test_a_reply_carries_its_question_and_the_asking_turn_in_provenance() -> None:
    turn = replace(
        _turn("Caroline: I went to a support group. It was so powerful."),
        replying_to=Question(turn_id="D1:2", text="What did you do yesterday?"),
    )
    [memory] = extract_local(turn, threshold=0.15)
    assert memory.content == (
        "Caroline went to a support group. It was so powerful. (asked: What did you do yesterday?)"
    )
    assert memory.source_turn_ids == ["D1:2", "D1:3"]
    assert last_question("Nice! How was it? I hope well.") == "How was it?"
    assert last_question("No question here.") is None


def test_a_lone_fragment_needs_more_than_the_threshold() -> None:
    assert extract_local(_turn("So cool!"), threshold=0.15) == []
    assert extract_local(_turn("marker"), threshold=0.15) == []
    [vegan] = extract_local(_turn("I'm vegan."), threshold=0.15)
    assert vegan.content == "Caroline is vegan."


def test_a_slot_fact_is_its_own_memory_so_a_change_supersedes_only_it() -> None:
    turn = _turn("I moved to Lisbon last month. The food there is amazing and cheap.")
    contents = [c.content for c in extract_local(turn, threshold=0.15)]
    assert contents == [
        "Caroline moved to Lisbon in April 2023.",
        "The food there is amazing and cheap.",
    ]
    assert find_slot(contents[0]) is not None


def test_extraction_speaker_falls_back_to_role_and_ignores_assistant() -> None:
    [memory] = extract_local(_turn("I prefer window seats.", speaker=None), threshold=0.35)
    assert memory.content == "The user prefers window seats."
    assert memory.kind == "preference"
    assistant = _turn("You prefer window seats.", speaker=None, role="assistant")
    assert extract_local(assistant, threshold=0.0) == []


def test_image_caption_becomes_a_memory() -> None:
    turn = TurnView(
        "t", "D1:5", "u", "s", "user", "Look at this!", SAID,
        {"speaker": "Mel", "image_caption": "a photo of a sunset over a lake"},
    )  # fmt: skip
    contents = [c.content for c in extract_local(turn, threshold=0.35)]
    assert "Mel shared a photo of a sunset over a lake." in contents


def test_merge_needs_similarity_and_no_differing_fact() -> None:
    same = decide_merge(
        "Ada loves hiking in the Alps.",
        "Ada really loves hiking in the Alps.",
        0.95,
        threshold=0.82,
    )
    assert same.merge
    assert not decide_merge("a", "b", 0.5, threshold=0.82).merge
    assert fact_guard("Revenue rose 5% in 2023.", "Revenue rose 7% in 2023.") == "numbers differ"
    assert fact_guard("Ada's sister is Maria.", "Ada's sister is Julia.") == "names differ"
    assert fact_guard("Ada likes tea.", "Ada does not like tea.") == "negation differs"
    assert (
        fact_guard("Ada likes tea.", "Ada likes tea, cake, biscuits and jam in the garden.")
        == "new information"
    )


def test_supersession_rule_is_per_subject_and_relation() -> None:
    slot = supersedes("Ada moved to Lisbon.", "Ada lives in Berlin.")
    assert slot is not None and (slot.subject, slot.relation, slot.value) == (
        "ada",
        "lives_in",
        "lisbon",
    )
    assert supersedes("Ada's sister lives in Rome.", "Ada lives in Berlin.") is None
    assert supersedes("Ada lives in Berlin now.", "Ada lives in Berlin.") is None
    assert supersedes("Ada works at Acme.", "Ada works at Initech.") is not None
    favourite = find_slot("The user's favorite color is green.")
    assert favourite is not None and favourite.relation == "favorite_color"
    assert find_slot("Ada went hiking.") is None


def test_local_summary_is_extractive_and_within_budget() -> None:
    summarizer = LocalSummarizer(budget_tokens=40, threshold=0.35)
    first = summarizer.summarize(None, [_turn("I adopted a puppy named Biscuit last week.")])
    assert "Caroline adopted a puppy named Biscuit" in first
    more = [
        _turn("I started a new job at the hospital as a counselor."),
        _turn("My sister is visiting from Boston next month for the wedding."),
        _turn("Thanks!"),
    ]
    second = summarizer.summarize(first, more)
    assert count_tokens(second) <= 40
    assert "Thanks" not in second
    assert "counselor" in second or "Boston" in second
