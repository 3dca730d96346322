"""LLM mode of the pipeline steps against a fake OpenAI-compatible server: the windowed
analysis (one call per window of a session's messages), JSON-schema response_format and
the endpoints that refuse it, validated JSON with one retry, local fallback per window
with its reason, the deadline, hybrid mode, the reconcile decision for
ambiguous cases only, the shared rate limit and token usage per stage and tenant."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.metrics import LLM_FALLBACKS_TOTAL
from memwell.db.models import LlmUsage
from memwell.llm.provider_rate_limit import RateLimited, RedisRateLimiter
from memwell.llm.structured import StructuredLLM, close_brackets, parse_json_answer
from memwell.llm.usage import UsageRecorder
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.consolidate import LocalAnalyzer
from memwell.pipeline.extract import TurnView
from memwell.pipeline.importance import score_text
from memwell.pipeline.llm_analysis import (
    LlmAnalyzer,
    MemoryOut,
    WindowOut,
    tidy,
    windows,
)
from memwell.pipeline.llm_steps import LlmDecider, LlmSummarizer
from memwell.pipeline.reconcile import Neighbour
from memwell.pipeline.summarize import LocalSummarizer
from tests.support.fake_analysis import analysis_answer
from tests.support.fake_openai import Delay, FakeOpenAI, Handler, Malformed, Reply, Status

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.fixture
def llm(fake_openai: FakeOpenAI, db: sessionmaker[Session]) -> Iterator[StructuredLLM]:
    fake_openai.reset()
    client = StructuredLLM(
        model="scripted",
        base_url=fake_openai.base_url,
        api_key="k",
        timeout_s=1.0,
        max_retries=1,
        usage=UsageRecorder(db),
    )
    yield client
    client.close()


def _turn(
    tenant: str, content: str, *, n: int = 1, role: str = "user", session: str = "s"
) -> TurnView:
    meta = {"speaker": "Caroline"} if role == "user" else {}
    return TurnView(tenant, f"t{n}", "u", session, role, content, SAID, meta)


def _analyzer(llm: StructuredLLM, *, hybrid: bool = False, turns: int = 12) -> LlmAnalyzer:
    local = LocalAnalyzer(threshold=0.15)
    return LlmAnalyzer(llm, local, window_turns=turns, window_tokens=1500, hybrid=hybrid)


def _usage(db: sessionmaker[Session], tenant: str) -> dict[str, LlmUsage]:
    with db() as session:
        rows = session.scalars(select(LlmUsage).where(LlmUsage.tenant == tenant)).all()
    return {r.stage: r for r in rows}


def _fallbacks(stage: str, reason: str) -> float:
    return LLM_FALLBACKS_TOTAL.labels(stage, reason)._value.get()


def test_one_call_analyses_a_window_with_the_json_schema(
    fake_openai: FakeOpenAI, llm: StructuredLLM, ids: dict[str, str]
) -> None:
    fake_openai.default_chat = Handler(analysis_answer)
    turns = [
        _turn(ids["tenant"], "I'm a counselor now.", n=1),
        _turn(ids["tenant"], "What a job! What made you choose it?", n=2, role="assistant"),
        _turn(ids["tenant"], "I adopted a puppy named Biscuit yesterday.", n=3),
        _turn(ids["tenant"], "Hi!", n=4),
    ]
    analysis = _analyzer(llm).analyze(turns, deadline=None)
    [request] = fake_openai.chat_requests
    schema = request.json["response_format"]
    assert schema["type"] == "json_schema"
    assert schema["json_schema"]["name"] == "WindowOut"
    assert "memories" in schema["json_schema"]["schema"]["properties"]
    assert request.json["max_tokens"] == 60 + 120 * 3  # three judged messages
    window = request.json["messages"][1]["content"]
    assert window.startswith("<date>2023-05-08</date>\n<msg id=1 ")  # once, not per message
    assert '<msg id=2 from="Caroline">I adopted a puppy' in window
    assert '<ctx from="The assistant">What a job!' in window  # context, not judged
    assert sorted(analysis.done) == ["t1", "t2", "t3", "t4"]
    [memory] = analysis.done["t3"].candidates
    # tidied as local mode writes: the speaker named, the date made absolute
    assert memory.content == "Caroline said: Caroline adopted a puppy named Biscuit on 7 May 2023."
    assert memory.metadata == {"speaker": "Caroline", "extractor": "llm"}
    assert analysis.done["t3"].importance == pytest.approx(7 / 9, abs=1e-3)
    assert analysis.done["t4"].candidates == []  # a greeting: no memory
    assert analysis.done["t4"].importance < 0.15  # local mode's score, for no memory
    assert analysis.done["t2"].candidates == []  # the assistant is never remembered


def test_an_endpoint_refusing_response_format_is_asked_without_it_from_then_on(
    fake_openai: FakeOpenAI, llm: StructuredLLM, ids: dict[str, str]
) -> None:
    fake_openai.default_chat = Handler(analysis_answer)
    fake_openai.response_formats = frozenset()
    analyzer = _analyzer(llm)
    first = analyzer.analyze([_turn(ids["tenant"], "I'm a counselor now.")], deadline=None)
    assert first.done["t1"].candidates[0].metadata["extractor"] == "llm"
    analyzer.analyze([_turn(ids["tenant"], "I live in Lisbon.", n=2)], deadline=None)
    sent = [(r.json.get("response_format") or {}).get("type") for r in fake_openai.chat_requests]
    # each shape refused once, then none is sent again
    assert sent == ["json_schema", "json_object", None, None]
    assert llm.schema_supported is False


def test_an_endpoint_taking_json_object_with_a_schema_keeps_getting_it(
    fake_openai: FakeOpenAI, llm: StructuredLLM, ids: dict[str, str]
) -> None:
    """llama-cpp-python's server: json_schema is a 500 that names response_format, and
    json_object with a schema constrains the answer to it."""
    fake_openai.default_chat = Handler(analysis_answer)
    fake_openai.response_formats = frozenset({"json_object"})
    fake_openai.response_format_refusal_status = 500
    analyzer = _analyzer(llm)
    analyzer.analyze([_turn(ids["tenant"], "I'm a counselor now.")], deadline=None)
    analyzer.analyze([_turn(ids["tenant"], "I live in Lisbon.", n=2)], deadline=None)
    formats = [r.json.get("response_format") for r in fake_openai.chat_requests]
    kinds = [f["type"] for f in formats]
    first = kinds.index("json_object")
    # the SDK retries the 500 before it reaches us; after that, json_schema is never sent
    assert set(kinds[:first]) == {"json_schema"} and set(kinds[first:]) == {"json_object"}
    assert "memories" in formats[-1]["schema"]["properties"]
    assert llm.schema_supported is True


def test_the_brief_answer_without_response_format_is_scored_by_the_local_rules(
    fake_openai: FakeOpenAI, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    """What `memwell up --llm-gguf` sets: llama-cpp-python samples a grammar slowly on a
    CPU, and every field costs a small model time; the answer is validated anyway."""
    fake_openai.reset()
    fake_openai.default_chat = Handler(analysis_answer)
    llm = StructuredLLM(model="m", base_url=fake_openai.base_url, api_key="k", timeout_s=2.0,
                        response_format="none")  # fmt: skip
    analyzer = LlmAnalyzer(llm, LocalAnalyzer(threshold=0.15), window_turns=12,
                           window_tokens=1500, brief=True)  # fmt: skip
    fake_openai.script_chat([Reply(json.dumps({"memories": [
        {"id": 1, "content": "Caroline prefers tea over coffee."},
        {"id": 1, "content": "Caroline is a counselor."}]}))])  # fmt: skip
    turn = _turn(ids["tenant"], "I'm a counselor now, and I prefer tea over coffee.")
    analysis = analyzer.analyze([turn], deadline=None)
    [request] = fake_openai.chat_requests
    assert "response_format" not in request.json
    system = request.json["messages"][0]["content"]
    assert "entities" not in system and "valid_from" not in system
    tea, counselor = analysis.done["t1"].candidates
    assert tea.metadata["extractor"] == "llm" and tea.entities is None
    assert (tea.kind, counselor.kind) == ("preference", "fact")  # the local rules
    assert tea.importance == round(score_text("Caroline prefers tea over coffee."), 4)
    assert analysis.done["t1"].importance == max(tea.importance, counselor.importance)
    llm.close()


def test_malformed_answer_is_retried_once_with_the_error(
    fake_openai: FakeOpenAI, llm: StructuredLLM, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    good = {"memories": [{"id": 1, "score": 9, "content": "Caroline went to a support group."}]}
    fake_openai.script_chat([Malformed('{"memories": ['), Reply(json.dumps(good))])
    analysis = _analyzer(llm).analyze(
        [_turn(ids["tenant"], "I went to a support group yesterday.")], deadline=None
    )
    assert analysis.done["t1"].importance == pytest.approx(8 / 9, abs=1e-3)
    retry = fake_openai.chat_requests[-1].json["messages"]
    assert retry[-1]["role"] == "user" and "not valid" in retry[-1]["content"]
    assert retry[-2] == {"role": "assistant", "content": '{"memories": ['}
    usage = _usage(db, ids["tenant"])["analyze"]
    assert usage.calls == 2 and usage.prompt_tokens > 0 and usage.fallbacks == 0


def test_two_bad_answers_fall_back_to_local_mode_with_the_reason(
    fake_openai: FakeOpenAI, llm: StructuredLLM, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    before = _fallbacks("analyze", "invalid_output")
    fake_openai.script_chat([Malformed("no json"), Reply('{"memories": [{"id": 1}]}')])
    analysis = _analyzer(llm).analyze(
        [
            _turn(ids["tenant"], "I went to a support group yesterday.", n=1),
            _turn(ids["tenant"], "My sister lives in Oslo.", n=2),
        ],
        deadline=None,
    )
    [memory] = analysis.done["t1"].candidates
    assert memory.content == "Caroline went to a support group on 7 May 2023."
    assert memory.metadata["extractor"] == "local"
    assert memory.metadata["fallback"] == "invalid_output"
    usage = _usage(db, ids["tenant"])["analyze"]
    assert (usage.failures, usage.fallbacks) == (1, 2)  # one window, two messages
    assert usage.fallback_reasons == {"invalid_output": 2}
    assert _fallbacks("analyze", "invalid_output") == before + 2


def test_a_message_the_model_passes_over_gets_no_memory_and_no_fallback(
    fake_openai: FakeOpenAI, llm: StructuredLLM, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    answer = {"memories": [
        {"id": 1, "score": 8, "kind": "fact", "content": "Caroline is a counselor."},
        {"id": 7, "score": 8, "kind": "fact", "content": "No such message."},
        {"id": 1, "score": 42, "kind": "job", "content": "Caroline works with people.",
         "valid_from": "last spring"},
        {"id": 2, "score": 8, "content": "Caroline is a counselor."}]}  # fmt: skip
    fake_openai.script_chat([Reply(json.dumps(answer))])
    analysis = _analyzer(llm).analyze(
        [
            _turn(ids["tenant"], "I'm a counselor now.", n=1),
            _turn(ids["tenant"], "Nice weather today.", n=2),
        ],
        deadline=None,
    )
    first = analysis.done["t1"].candidates
    assert [c.content for c in first] == ["Caroline is a counselor.", "Caroline works with people."]
    # a near miss in one field is mended, not a reason to throw the window away
    assert (first[1].kind, first[1].importance, "valid_from" in first[1].metadata) == (
        "fact", 1.0, False)  # fmt: skip
    assert analysis.done["t2"].candidates == []  # the first one's memory, repeated
    assert analysis.done["t2"].importance == LocalAnalyzer(threshold=0.15).importance(
        _turn(ids["tenant"], "Nice weather today.", n=2)
    )
    usage = _usage(db, ids["tenant"])["analyze"]
    # No message fell back; the three mended values (score, kind, date) are counted.
    assert (usage.failures, usage.fallback_reasons) == (0, {"invalid_value": 3})


def test_endpoint_down_and_timeout_fall_back_with_their_reasons(
    fake_openai: FakeOpenAI, llm: StructuredLLM, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    fake_openai.script_chat([Status(500), Status(500)])  # the SDK retries once
    turn = _turn(ids["tenant"], "I live in Lisbon.")
    analysis = _analyzer(llm).analyze([turn], deadline=None)
    assert analysis.done["t1"].candidates[0].metadata["fallback"] == "endpoint_error"
    fake_openai.script_chat([Delay(3.0, Reply("{}")), Delay(3.0, Reply("{}"))])
    summarizer = LlmSummarizer(llm, LocalSummarizer(budget_tokens=100))
    summary = summarizer.summarize(None, [_turn(ids["tenant"], "I adopted a puppy named Biscuit.")])
    assert summary == "Caroline adopted a puppy named Biscuit."
    usage = _usage(db, ids["tenant"])
    assert usage["analyze"].fallback_reasons == {"endpoint_error": 1}
    assert usage["summarize"].fallback_reasons == {"timeout": 1}


def test_windows_hold_one_session_and_respect_both_bounds(ids: dict[str, str]) -> None:
    t = ids["tenant"]
    turns = [
        _turn(t, "one", n=1),
        _turn(t, "two", n=2, role="assistant"),
        _turn(t, "three", n=3),
        _turn(t, "elsewhere", n=4, session="other"),
        _turn(t, "four", n=5),
        _turn(t, "word " * 400, n=6),
    ]
    cut = windows(turns, max_turns=2, max_tokens=300)
    assert [[x.turn_id for x in w.turns] for w in cut] == [
        ["t1", "t2", "t3"],  # two judged messages, the assistant's between them as context
        ["t4"],  # another session: its own window
        ["t5"],
        ["t6"],  # too long to share a window: alone
    ]


def test_past_the_deadline_no_new_window_starts(
    fake_openai: FakeOpenAI, llm: StructuredLLM, ids: dict[str, str]
) -> None:
    fake_openai.default_chat = Handler(analysis_answer)
    turns = [_turn(ids["tenant"], f"I visited city number {i}.", n=i) for i in range(1, 5)]
    analysis = _analyzer(llm, turns=2).analyze(turns, deadline=time.monotonic() - 1)
    assert sorted(analysis.done) == ["t1", "t2"]  # the first window always runs
    assert len(fake_openai.chat_requests) == 1


def test_a_window_the_model_cannot_answer_before_the_deadline_is_left_pending(
    fake_openai: FakeOpenAI, llm: StructuredLLM, ids: dict[str, str]
) -> None:
    """At the pace of the calls so far, a second call would end past the deadline: it
    is not started, rather than cut off and fallen back."""
    answer = json.dumps({"memories": [{"id": 1, "score": 8, "content": "Caroline visited Oslo."}]})
    fake_openai.script_chat([Delay(0.6, Reply(answer)), Delay(0.6, Reply(answer))])
    turns = [_turn(ids["tenant"], f"I visited city number {i}.", n=i) for i in range(1, 4)]
    analyzer = _analyzer(llm, turns=1)
    analysis = analyzer.analyze(turns, deadline=time.monotonic() + 1.0)
    assert sorted(analysis.done) == ["t1"] and len(fake_openai.chat_requests) == 1
    assert analyzer.seconds_per_message is not None and analyzer.seconds_per_message >= 0.6
    assert all(c.metadata["extractor"] == "llm" for c in analysis.done["t1"].candidates)


class _SpentAfter(RedisRateLimiter):
    """The shared rate limit, spent after `allowed` requests (as another worker's
    traffic would spend it)."""

    def __init__(self, client: redis.Redis, allowed: int) -> None:
        super().__init__(client, per_minute=1, max_wait_s=0)
        self.allowed = allowed

    def acquire(self, *, max_wait_s: float | None = None) -> None:
        if self.allowed <= 0:
            raise RateLimited("spent")
        self.allowed -= 1


def test_a_spent_rate_limit_stops_the_analysis_without_falling_back(
    fake_openai: FakeOpenAI, redis_url: str, ids: dict[str, str]
) -> None:
    fake_openai.reset()
    fake_openai.default_chat = Handler(analysis_answer)
    client = redis.Redis.from_url(redis_url)
    turns = [_turn(ids["tenant"], f"I visited city number {i}.", n=i) for i in range(1, 5)]
    for allowed, done in ((1, ["t1", "t2"]), (0, None)):
        llm = StructuredLLM(model="m", base_url=fake_openai.base_url, api_key="k",
                            timeout_s=1.0, limiter=_SpentAfter(client, allowed))  # fmt: skip
        analyzer = _analyzer(llm, turns=2)
        if done is None:  # nothing done: up to the task, which retries later
            with pytest.raises(RateLimited):
                analyzer.analyze(turns, deadline=time.monotonic() + 30)
        else:
            analysis = analyzer.analyze(turns, deadline=time.monotonic() + 30)
            assert sorted(analysis.done) == done  # the rest stays pending, not local
            assert all(c.metadata["extractor"] == "llm" for c in analysis.done["t1"].candidates)
        llm.close()
    client.close()


def test_hybrid_keeps_local_memories_and_adds_what_the_model_adds(
    fake_openai: FakeOpenAI, llm: StructuredLLM, ids: dict[str, str]
) -> None:
    answer = {"memories": [
        {"id": 1, "score": 9, "kind": "preference", "content": "Caroline enjoys pottery."},
        {"id": 2, "score": 9, "kind": "fact", "content": "Caroline's sister Maya lives in Oslo."},
    ]}  # fmt: skip
    fake_openai.script_chat([Reply(json.dumps(answer))])
    analysis = _analyzer(llm, hybrid=True).analyze(
        [
            _turn(ids["tenant"], "I made a clay bowl in class yesterday.", n=1),
            _turn(ids["tenant"], "Caroline's sister Maya lives in Oslo.", n=2),
        ],
        deadline=None,
    )
    local, model = analysis.done["t1"].candidates
    assert local.metadata["extractor"] == "local" and "fallback" not in local.metadata
    assert "clay bowl" in local.content
    assert (model.content, model.metadata["extractor"]) == ("Caroline enjoys pottery.", "llm")
    # scored by the local rule, as the local memories beside it are
    assert model.importance == round(score_text("Caroline enjoys pottery."), 4)
    [only] = analysis.done["t2"].candidates  # the model's copy adds nothing
    assert only.metadata["extractor"] == "local"


def test_a_memory_joining_two_messages_lists_both_as_its_sources(
    fake_openai: FakeOpenAI, llm: StructuredLLM, ids: dict[str, str]
) -> None:
    joined = "Caroline took a stunning picture last summer on a trip to the Smoky Mountains."
    answer = {"memories": [{"id": 1, "score": 7, "kind": "event", "content": joined}]}
    fake_openai.script_chat([Reply(json.dumps(answer))])
    analysis = _analyzer(llm).analyze(
        [
            _turn(ids["tenant"], "I took this pic last summer. It was so stunning.", n=1),
            _turn(ids["tenant"], "Where did you take it?", n=2, role="assistant"),
            _turn(ids["tenant"], "On my trip to the Smoky Mountains last year.", n=3),
        ],
        deadline=None,
    )
    [memory] = analysis.done["t1"].candidates
    # the cited message first, then the one it also draws on: erasing either erases it
    assert memory.source_turn_ids == ["t1", "t3"]
    assert analysis.done["t3"].candidates == []


def test_model_memories_lose_their_greeting(
    fake_openai: FakeOpenAI, llm: StructuredLLM, ids: dict[str, str]
) -> None:
    answer = {"memories": [
        {"id": 1, "score": 8, "kind": "fact", "content": "Hi! The user's name is Ada Okafor."},
        {"id": 1, "score": 8, "kind": "fact", "content": "Thanks!"}]}  # fmt: skip
    fake_openai.script_chat([Reply(json.dumps(answer))])
    analysis = _analyzer(llm).analyze(
        [_turn(ids["tenant"], "Hi! My name is Ada Okafor.")], deadline=None
    )
    assert [c.content for c in analysis.done["t1"].candidates] == ["The user's name is Ada Okafor."]


def test_llm_reconcile_asks_only_about_ambiguous_cases(
    fake_openai: FakeOpenAI, llm: StructuredLLM, ids: dict[str, str]
) -> None:
    old = Neighbour(id=uuid.uuid4(), content="Ada lives in Berlin.",
                    content_hash="h", kind="fact", similarity=0.7)  # fmt: skip
    cand = Candidate(ids["tenant"], "u", "s", "fact", "Ada moved to Lisbon.", 0.7, SAID, ["t9"])
    decider = LlmDecider(llm, merge_threshold=0.75)
    fake_openai.script_chat(
        [
            Reply('{"action": "supersede", "target": 0}'),
            Reply('{"action": "update", "target": 0, "content": "Ada lives in Berlin, Mitte."}'),
            Reply('{"action": "supersede", "target": 7}'),
        ]
    )
    first = decider.decide(cand, [old])
    assert first is not None and first.action == "supersede" and first.target == old
    second = decider.decide(cand, [old])
    assert second is not None and second.action == "merge"
    assert second.content == "Ada lives in Berlin, Mitte."
    assert decider.decide(cand, [old]) is None  # an out-of-range target: use the local rule
    calls = len(fake_openai.chat_requests)
    clear = Neighbour(id=old.id, content=old.content, content_hash="h", kind="fact",
                      similarity=0.98)  # fmt: skip
    assert decider.decide(cand, [clear]) is None  # clearly a paraphrase: no call
    assert len(fake_openai.chat_requests) == calls


def test_shared_rate_limit_gives_up_after_its_wait(redis_url: str, ids: dict[str, str]) -> None:
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match="mw:llm:rate:*"):
        client.delete(key)
    first = RedisRateLimiter(client, per_minute=2, max_wait_s=0)
    second = RedisRateLimiter(client, per_minute=2, max_wait_s=0)  # another worker
    first.acquire()
    second.acquire()
    with pytest.raises(RateLimited):
        first.acquire()
    RedisRateLimiter(client, per_minute=0, max_wait_s=0).acquire()  # 0: no cap
    client.close()


def test_analysis_schema_needs_the_message_and_the_content_and_mends_the_rest() -> None:
    with pytest.raises(ValueError):
        MemoryOut.model_validate({"score": 5, "content": "Ada lives in Oslo."})
    with pytest.raises(ValueError):
        MemoryOut.model_validate({"id": 1, "score": 5})
    mended = MemoryOut.model_validate({"id": 1, "score": 0, "kind": "Fact!", "content": "Ada."
                                       , "valid_from": "2023-05-07"})  # fmt: skip
    assert (mended.score, mended.kind, str(mended.valid_from)) == (1, "fact", "2023-05-07")


def test_a_copied_message_is_tidied_into_a_memory(ids: dict[str, str]) -> None:
    """What a small model writes when it copies the transcript instead of restating it."""
    turn = TurnView(ids["tenant"], "t1", "u", "s", "user", "x", SAID, {"speaker": "Melanie"})
    copied = "Melanie: Thanks! I painted that lake sunrise last year. Did you see it?"
    assert tidy(copied, turn) == ("Melanie painted that lake sunrise in 2022.", True)
    assert tidy("Hey Mel! How have you been?", turn) == ("", False)  # greeting, question
    assert tidy("Hi! The user's name is Ada Okafor.", turn) == (
        "The user's name is Ada Okafor.", False)  # fmt: skip


def test_an_answer_missing_its_closing_brackets_is_still_read() -> None:
    """A small model often stops after the last array; brackets inside strings and
    escaped quotes do not count."""
    cut = '```json\n{"memories": [{"id": 1, "content": "Ada said \\"hi\\" {twice}] here."}]\n```'
    [memory] = parse_json_answer(cut, WindowOut).memories
    assert memory.content == 'Ada said "hi" {twice}] here.'
    assert close_brackets('{"a": [1, {"b": "]"') == '{"a": [1, {"b": "]"}]}'
    ran_out = '{"memories": [{"id": 1, "content": "Ada lives in Oslo."}, {"id": 2, "cont'
    assert [m.id for m in parse_json_answer(ran_out, WindowOut).memories] == [1]
    with pytest.raises(ValueError):
        parse_json_answer('{"memories": [{"id": 1, "content": }', WindowOut)
