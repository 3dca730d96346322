"""LLM mode of the pipeline steps against a fake OpenAI-compatible server: validated
JSON, one retry with the parse error, local fallback, 429 with Retry-After, timeouts,
the shared rate limit and token usage per stage and tenant."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import LlmUsage
from memwell.llm.provider_rate_limit import RateLimited, RedisRateLimiter
from memwell.llm.structured import StructuredLLM
from memwell.llm.usage import UsageRecorder
from memwell.pipeline.consolidate import LocalAnalyzer
from memwell.pipeline.extract import TurnView
from memwell.pipeline.llm_steps import ImportanceOut, LlmAnalyzer, LlmDecider, LlmSummarizer
from memwell.pipeline.reconcile import Neighbour
from memwell.pipeline.summarize import LocalSummarizer
from tests.support.fake_openai import Delay, FakeOpenAI, Malformed, Reply, Status

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


def _turn(tenant: str, content: str) -> TurnView:
    return TurnView(tenant, "t1", "u", "s", "user", content, SAID, {"speaker": "Caroline"})


def _usage(db: sessionmaker[Session], tenant: str) -> dict[str, tuple[int, int, int, int]]:
    with db() as session:
        rows = session.scalars(select(LlmUsage).where(LlmUsage.tenant == tenant)).all()
    return {
        r.stage: (r.calls, r.prompt_tokens + r.completion_tokens, r.failures, r.fallbacks)
        for r in rows
    }


def test_malformed_answer_is_retried_once_with_the_error(
    fake_openai: FakeOpenAI, llm: StructuredLLM, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    fake_openai.script_chat(
        [Malformed('{"score": 9'), Reply('{"score": 9, "reason": "life event"}')]
    )
    analyzer = LlmAnalyzer(llm, LocalAnalyzer(threshold=0.35))
    score = analyzer.importance(_turn(ids["tenant"], "I went to a support group yesterday."))
    assert score == pytest.approx(8 / 9, abs=1e-3)
    retry = fake_openai.chat_requests[-1].json["messages"]
    assert retry[-1]["role"] == "user" and "not valid" in retry[-1]["content"]
    assert retry[-2] == {"role": "assistant", "content": '{"score": 9'}
    calls, tokens, failures, fallbacks = _usage(db, ids["tenant"])["importance"]
    assert calls == 2 and tokens > 0 and failures == fallbacks == 0


def test_two_bad_answers_fall_back_to_local_mode_for_the_item(
    fake_openai: FakeOpenAI, llm: StructuredLLM, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    fake_openai.script_chat([Malformed("no json"), Reply('{"memories": [{"kind": "mood"}]}')])
    analyzer = LlmAnalyzer(llm, LocalAnalyzer(threshold=0.35))
    turn = _turn(ids["tenant"], "I went to a support group yesterday.")
    [memory] = analyzer.extract(turn, importance=0.9)
    assert memory.content == "Caroline went to a support group on 7 May 2023."
    assert memory.metadata["extractor"] == "local"
    assert _usage(db, ids["tenant"])["extract"][2:] == (1, 1)


def test_structured_extraction_and_rate_limit_answer(
    fake_openai: FakeOpenAI, llm: StructuredLLM, ids: dict[str, str]
) -> None:
    answer = {
        "memories": [
            {"kind": "event", "content": "Caroline went to a support group on 7 May 2023.",
             "valid_from": "2023-05-07"}
        ]
    }  # fmt: skip
    fake_openai.script_chat([Status(429, retry_after=0.2), Reply(json.dumps(answer))])
    analyzer = LlmAnalyzer(llm, LocalAnalyzer(threshold=0.35))
    [memory] = analyzer.extract(_turn(ids["tenant"], "I went to a group yesterday."), 0.9)
    assert memory.metadata == {
        "speaker": "Caroline", "extractor": "llm", "valid_from": "2023-05-07"
    }  # fmt: skip
    assert memory.source_turn_ids == ["t1"]
    assert len(fake_openai.chat_requests) == 2  # the SDK honoured Retry-After and retried
    prompt = fake_openai.chat_requests[-1].json["messages"][1]["content"]
    assert prompt.startswith('<turn speaker="Caroline" date="2023-05-08">')


def test_timeout_falls_back_and_low_importance_skips_the_call(
    fake_openai: FakeOpenAI, llm: StructuredLLM, ids: dict[str, str]
) -> None:
    fake_openai.script_chat([Delay(3.0, Reply("{}")), Delay(3.0, Reply("{}"))])
    summarizer = LlmSummarizer(llm, LocalSummarizer(budget_tokens=100))
    summary = summarizer.summarize(None, [_turn(ids["tenant"], "I adopted a puppy named Biscuit.")])
    assert summary == "Caroline adopted a puppy named Biscuit."
    fake_openai.reset()
    analyzer = LlmAnalyzer(llm, LocalAnalyzer(threshold=0.35))
    assert analyzer.extract(_turn(ids["tenant"], "ok thanks"), importance=0.1) == []
    assert fake_openai.chat_requests == []


def test_llm_reconcile_decisions(
    fake_openai: FakeOpenAI, llm: StructuredLLM, ids: dict[str, str]
) -> None:
    from memwell.pipeline.candidate import Candidate

    old = Neighbour(id=__import__("uuid").uuid4(), content="Ada lives in Berlin.",
                    content_hash="h", kind="fact", similarity=0.7)  # fmt: skip
    cand = Candidate(ids["tenant"], "u", "s", "fact", "Ada moved to Lisbon.", 0.7, SAID, ["t9"])
    decider = LlmDecider(llm)
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


def test_importance_schema_rejects_out_of_range() -> None:
    with pytest.raises(ValueError):
        ImportanceOut.model_validate({"score": 11})
