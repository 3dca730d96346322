"""A model call has a total time, not one per read: an endpoint that drips its answer,
or asks to be retried after a minute, is cut at the call's time and handed to local
mode (or, when the caller asks, left for later), through the real SDK over real HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from memwell.llm.structured import StructuredLLM
from tests.support.fake_openai import Drip, FakeOpenAI, Reply, Status

#: How long the dripping answer would last if nothing cut it.
DRIP_S = 60.0


class Out(BaseModel):
    summary: str


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def _llm(fake: FakeOpenAI, timeout_s: float, max_retries: int = 2) -> StructuredLLM:
    return StructuredLLM(
        model="m", base_url=fake.base_url, api_key="k", timeout_s=timeout_s,
        max_retries=max_retries,
    )  # fmt: skip


def _ask(llm: StructuredLLM, **kwargs: object) -> tuple[object, float]:
    started = time.monotonic()
    answer = llm.call(
        stage="summarize", tenant="t", system="s", user="u", schema=Out,
        **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip
    return answer, time.monotonic() - started


def test_a_dripping_answer_is_cut_at_the_calls_time(fake: FakeOpenAI) -> None:
    body = json.dumps({"summary": "x" * 200})
    fake.default_chat = Drip(body, interval=DRIP_S / 300)
    llm = _llm(fake, timeout_s=2.0)
    answer, took = _ask(llm)
    assert answer.value is None and answer.fallback == "timeout"  # type: ignore[attr-defined]
    # Cut at its 2 s (each read alone would have waited 0.2 s at most and gone on for a
    # minute), and not asked again: the time was spent.
    assert took < 2.0 + 1.5, f"the call took {took:.1f} s"
    assert len(fake.chat_requests) == 1


def test_a_call_out_of_time_can_be_left_for_later(fake: FakeOpenAI) -> None:
    fake.default_chat = Drip(json.dumps({"summary": "late"}), interval=0.5)
    answer, _ = _ask(_llm(fake, timeout_s=1.0), on_timeout="defer")
    assert answer.deferred and answer.value is None  # type: ignore[attr-defined]


def test_a_deadline_shortens_the_call(fake: FakeOpenAI) -> None:
    fake.default_chat = Drip(json.dumps({"summary": "late"}), interval=DRIP_S / 30)
    deadline = time.monotonic() + 6.0  # MIN_CALL_S (5 s) is the least a call gets
    answer, took = _ask(_llm(fake, timeout_s=DRIP_S), deadline=deadline)
    assert answer.fallback == "timeout"  # type: ignore[attr-defined]
    assert took < 6.0 + 1.5, f"the call took {took:.1f} s"


def test_retries_fit_inside_the_calls_time(fake: FakeOpenAI) -> None:
    # An endpoint that asks to be tried again in a minute: not waited for past the call's
    # time; the call falls back at once instead.
    fake.default_chat = Status(503, retry_after=60)
    answer, took = _ask(_llm(fake, timeout_s=3.0))
    assert answer.fallback == "endpoint_error"  # type: ignore[attr-defined]
    assert took < 3.0
    assert len(fake.chat_requests) == 1


def test_a_short_retry_after_is_honoured(fake: FakeOpenAI) -> None:
    fake.script_chat([Status(429, retry_after=0.2), Reply(json.dumps({"summary": "ok"}))])
    answer, _ = _ask(_llm(fake, timeout_s=10.0))
    assert answer.value == Out(summary="ok")  # type: ignore[attr-defined]
    first, second = fake.chat_requests
    assert second.at - first.at >= 0.2


def test_an_error_body_does_not_reach_the_log(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    canary = "canary-echoed-prompt-7f3a"
    fake.default_chat = Status(500, body={"error": {"message": f"you said {canary}"}})
    answer, _ = _ask(_llm(fake, timeout_s=5.0, max_retries=0))
    assert answer.fallback == "endpoint_error"  # type: ignore[attr-defined]
    assert "HTTP 500" in caplog.text
    assert canary not in caplog.text
