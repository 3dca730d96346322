"""A broken or hostile model endpoint, answering StructuredLLM (memwell/llm/structured.py)
and the steps that use it: whatever it sends, the call returns an answer or a counted
fallback, never an exception, and nothing it sends or is sent reaches the log."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import LlmUsage
from memwell.llm.structured import StructuredLLM
from memwell.llm.usage import UsageRecorder
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.extract import TurnView
from memwell.pipeline.llm_analysis import WindowOut
from memwell.pipeline.llm_steps import LlmDecider, LlmSummarizer
from memwell.pipeline.reconcile import Neighbour
from memwell.pipeline.summarize import LocalSummarizer
from tests.support.fake_openai import FakeOpenAI, Malformed, Raw, Reply, Status

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.fixture
def llm(fake_openai: FakeOpenAI, db: sessionmaker[Session]) -> Iterator[StructuredLLM]:
    fake_openai.reset()
    client = StructuredLLM(model="hostile", base_url=fake_openai.base_url, api_key="k",
                           timeout_s=2.0, max_retries=0, usage=UsageRecorder(db))  # fmt: skip
    yield client
    client.close()


@pytest.fixture
def canary() -> str:
    return f"CANARY{uuid.uuid4().hex}"


def _reasons(db: sessionmaker[Session], tenant: str, stage: str) -> dict[str, int]:
    with db() as session:
        usage = session.scalars(
            select(LlmUsage).where(LlmUsage.tenant == tenant, LlmUsage.stage == stage)
        ).one()
    return dict(usage.fallback_reasons)


def _call(llm: StructuredLLM, tenant: str, canary: str) -> object:
    answer = llm.call(stage="analyze", tenant=tenant, system="s", user=f"<msg>{canary}</msg>",
                      schema=WindowOut, items=3)  # fmt: skip
    return answer.fallback if answer.value is None else answer.value


BROKEN = {
    "not JSON, said to be JSON": Raw(b"<html>502 upstream</html>"),
    "not JSON, said to be HTML": Raw(b"<html>502 upstream</html>", content_type="text/html"),
    "no choices": Raw(json.dumps({"id": "x", "object": "chat.completion", "choices": []}).encode()),
    "choices of the wrong shape": Raw(json.dumps({"choices": [1, 2]}).encode()),
    "JSON that is a list": Raw(b"[1, 2, 3]"),
    "invalid UTF-8": Raw(b'{"choices": [{"message": {"content": "\xff\xfe"}}]}'),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_200_that_is_no_completion_is_a_counted_fallback(
    case: str, fake_openai: FakeOpenAI, llm: StructuredLLM, db: sessionmaker[Session],
    ids: dict[str, str], canary: str,
) -> None:  # fmt: skip
    fake_openai.script_chat([BROKEN[case]])
    assert _call(llm, ids["tenant"], canary) == "invalid_output"
    assert _reasons(db, ids["tenant"], "analyze") == {"invalid_output": 3}


def test_nothing_the_endpoint_sends_or_is_sent_is_logged(
    fake_openai: FakeOpenAI, llm: StructuredLLM, db: sessionmaker[Session],
    ids: dict[str, str], canary: str, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.INFO)
    echo = {"error": {"message": f"bad request: {canary}", "type": "server_error"}}
    fake_openai.script_chat([Status(500, body=echo)])  # an endpoint that echoes the prompt
    assert _call(llm, ids["tenant"], canary) == "endpoint_error"
    bad_value = {"memories": [{"id": 1, "content": f"{canary} \x00"},
                              {"id": 1, "content": f"{canary} is fine."}]}  # fmt: skip
    fake_openai.script_chat([Reply(json.dumps(bad_value))])
    kept = _call(llm, ids["tenant"], canary)
    assert isinstance(kept, WindowOut) and len(kept.memories) == 1
    wrong_shape = f'{{"memories": "{canary}"'
    fake_openai.script_chat([Malformed(f"{canary} no JSON"), Malformed(wrong_shape)])
    assert _call(llm, ids["tenant"], canary) == "invalid_output"
    assert "HTTP 500" in caplog.text and "answer refused" in caplog.text  # it was logged
    assert canary not in caplog.text
    assert _reasons(db, ids["tenant"], "analyze") == {
        "endpoint_error": 3, "invalid_value": 1, "invalid_output": 3}  # fmt: skip


def test_the_retry_shows_the_model_where_and_why_not_its_text_again(
    fake_openai: FakeOpenAI, llm: StructuredLLM, ids: dict[str, str], canary: str
) -> None:
    deep = '{"memories": ' + "[" * 5000 + "]" * 5000 + "}"
    fake_openai.script_chat([Malformed(f"\ud800{canary}"), Malformed(deep)])
    assert _call(llm, ids["tenant"], canary) == "invalid_output"
    retry = fake_openai.chat_requests[-1].json["messages"]
    assert retry[-1]["content"].startswith("That answer was not valid: no JSON object")
    assert retry[-2] == {"role": "assistant", "content": f"?{canary}"}  # sendable again
    fake_openai.script_chat([Malformed(deep), Reply('{"memories": []}')])
    assert _call(llm, ids["tenant"], canary) == WindowOut(memories=[])
    retry = fake_openai.chat_requests[-1].json["messages"]
    assert "nests deeper than 32 levels" in retry[-1]["content"]


def test_summaries_and_decisions_pass_the_same_rules(
    fake_openai: FakeOpenAI, llm: StructuredLLM, db: sessionmaker[Session],
    ids: dict[str, str], canary: str,
) -> None:  # fmt: skip
    tenant = ids["tenant"]
    turn = TurnView(tenant, "t1", "u", "s", "user", "I adopted a puppy named Biscuit.", SAID,
                    {"speaker": "Caroline"})  # fmt: skip
    escape = json.dumps({"summary": f"\x1b[2J{canary} summary"})
    fake_openai.script_chat([Reply(escape), Reply(escape)])
    summary = LlmSummarizer(llm, LocalSummarizer(budget_tokens=100)).summarize(None, [turn])
    assert summary == "Caroline adopted a puppy named Biscuit."  # the local summary
    assert _reasons(db, tenant, "summarize") == {"invalid_value": 1}

    old = Neighbour(id=uuid.uuid4(), content="Ada lives in Berlin.", content_hash="h",
                    kind="fact", similarity=0.7)  # fmt: skip
    new = Candidate(tenant, "u", "s", "fact", "Ada moved to Lisbon.", 0.7, SAID, ["t9"])
    merged = json.dumps({"action": "update", "target": 0, "content": f"{canary}\u0000"})
    fake_openai.script_chat([Reply(merged), Reply(merged),
                             Reply('{"action": "supersede", "target": NaN}')])  # fmt: skip
    decider = LlmDecider(llm, merge_threshold=0.75)
    assert decider.decide(new, [old]) is None  # the local rule decides
    assert decider.decide(new, [old]) is None  # no neighbour named
    assert _reasons(db, tenant, "reconcile") == {"invalid_value": 2}
