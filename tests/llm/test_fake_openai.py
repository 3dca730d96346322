"""The fake OpenAI server, driven by the real ``openai`` SDK."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import openai
import pytest

from tests.support.fake_openai import (
    Delay,
    FakeOpenAI,
    Handler,
    Malformed,
    Normal,
    Reply,
    Status,
    cosine,
    last_user_message,
)

MODEL = "gpt-4o-mini"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def client(fake: FakeOpenAI) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=fake.base_url, api_key="x", max_retries=0, timeout=10) as c:
        yield c


def _ask(client: openai.OpenAI, text: str, **kwargs: Any) -> str | None:
    resp = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": text}], **kwargs
    )
    content: str | None = resp.choices[0].message.content
    return content


def test_base_url_is_loopback_v1(fake: FakeOpenAI) -> None:
    assert fake.base_url == f"http://127.0.0.1:{fake.port}/v1"
    assert fake.port > 0


def test_reply_round_trip_and_recorded_request(fake: FakeOpenAI, client: openai.OpenAI) -> None:
    fake.script_chat([Reply('{"facts": ["likes tea"]}')])
    resp = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": "Extract facts."},
            {"role": "user", "content": "I like tea"},
        ],
        temperature=0,
    )
    assert resp.object == "chat.completion"
    assert resp.model == MODEL
    assert resp.id.startswith("chatcmpl-")
    choice = resp.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == '{"facts": ["likes tea"]}'
    assert choice.finish_reason == "stop"
    assert resp.usage is not None
    assert resp.usage.prompt_tokens > 0 and resp.usage.completion_tokens > 0
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens

    (req,) = fake.requests
    assert req.method == "POST"
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer x"
    assert req.headers["content-type"].startswith("application/json")
    assert req.json["model"] == MODEL
    assert req.json["temperature"] == 0
    assert req.json["messages"][1] == {"role": "user", "content": "I like tea"}
    assert req.prompt == "I like tea"
    assert fake.pending_chat == 0


def test_default_responder_echoes_then_is_settable(fake: FakeOpenAI, client: openai.OpenAI) -> None:
    assert _ask(client, "hello there") == "fake reply to: hello there"
    fake.default_chat = Reply("fixed")
    assert _ask(client, "anything") == "fixed"
    fake.default_chat = Handler(lambda body: last_user_message(body).upper())
    assert _ask(client, "shout") == "SHOUT"


def test_script_is_consumed_in_order_then_falls_back(
    fake: FakeOpenAI, client: openai.OpenAI
) -> None:
    fake.script_chat([Reply("one"), Normal(), Malformed('{"facts": [')])
    assert _ask(client, "a") == "one"
    assert _ask(client, "b") == "fake reply to: b"
    bad = _ask(client, "c")
    assert bad == '{"facts": ['
    with pytest.raises(json.JSONDecodeError):
        json.loads(bad)
    assert _ask(client, "d") == "fake reply to: d"
    assert len(fake.chat_requests) == 4


def test_handler_routes_on_prompt(fake: FakeOpenAI, client: openai.OpenAI) -> None:
    def route(body: dict[str, Any]) -> str:
        prompt = last_user_message(body)
        return '{"kind": "summary"}' if "summarize" in prompt else '{"kind": "facts"}'

    fake.default_chat = Handler(route)
    assert _ask(client, "please summarize this") == '{"kind": "summary"}'
    assert _ask(client, "extract facts") == '{"kind": "facts"}'


def test_handler_exception_becomes_500(fake: FakeOpenAI, client: openai.OpenAI) -> None:
    def boom(body: dict[str, Any]) -> str:
        raise ValueError("bad route")

    fake.script_chat([Handler(boom)])
    with pytest.raises(openai.InternalServerError):
        _ask(client, "x")
    assert [type(e) for e in fake.handler_errors] == [ValueError]


def test_rate_limit_with_retry_after(fake: FakeOpenAI, client: openai.OpenAI) -> None:
    fake.script_chat([Status(429, retry_after=7)])
    with pytest.raises(openai.RateLimitError) as excinfo:
        _ask(client, "hi")
    err = excinfo.value
    assert err.status_code == 429
    assert err.response.headers["retry-after"] == "7"
    assert isinstance(err.body, dict)
    assert err.body["code"] == "rate_limit_exceeded"
    assert "message" in err.body and "type" in err.body
    # The script is consumed; the next call succeeds.
    assert _ask(client, "again") == "fake reply to: again"


@pytest.mark.parametrize(
    ("code", "exc_type"),
    [
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
        (400, openai.BadRequestError),
    ],
)
def test_error_statuses(
    fake: FakeOpenAI, client: openai.OpenAI, code: int, exc_type: type[openai.APIStatusError]
) -> None:
    fake.script_chat([Status(code)])
    with pytest.raises(exc_type) as excinfo:
        _ask(client, "hi")
    assert excinfo.value.status_code == code
    assert "retry-after" not in excinfo.value.response.headers


def test_status_custom_body(fake: FakeOpenAI, client: openai.OpenAI) -> None:
    body = {"error": {"message": "context too long", "type": "invalid_request_error", "code": "x"}}
    fake.script_chat([Status(400, body=body)])
    with pytest.raises(openai.BadRequestError) as excinfo:
        _ask(client, "hi")
    assert "context too long" in str(excinfo.value)


def test_sdk_retries_honour_retry_after(fake: FakeOpenAI) -> None:
    fake.script_chat([Status(429, retry_after=0.2), Reply("after retry")])
    with openai.OpenAI(base_url=fake.base_url, api_key="x", max_retries=2, timeout=10) as c:
        assert _ask(c, "hi") == "after retry"
    first, second = fake.chat_requests
    assert second.at - first.at >= 0.15


def test_delay_longer_than_timeout_raises_timeout(fake: FakeOpenAI) -> None:
    fake.script_chat([Delay(3.0, Reply("too late")), Reply("on time")])
    with openai.OpenAI(base_url=fake.base_url, api_key="x", max_retries=0, timeout=0.3) as c:
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            _ask(c, "slow")
        assert time.monotonic() - started < 2.5
        # The server keeps serving other requests while the delayed one sleeps.
        assert _ask(c, "fast") == "on time"


def test_short_delay_then_reply(fake: FakeOpenAI, client: openai.OpenAI) -> None:
    fake.script_chat([Delay(0.1, Reply("ok"))])
    started = time.monotonic()
    assert _ask(client, "x") == "ok"
    assert time.monotonic() - started >= 0.1


def test_streaming_yields_content(fake: FakeOpenAI, client: openai.OpenAI) -> None:
    text = "The quick brown fox\njumps over  the lazy dog."
    fake.script_chat([Reply(text)])
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "tell me"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces: list[str] = []
    finish: list[str] = []
    usage_seen = False
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        assert chunk.model == MODEL
        if chunk.usage is not None:
            usage_seen = True
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
            if choice.finish_reason:
                finish.append(choice.finish_reason)
    assert "".join(pieces) == text
    assert len(pieces) > 1
    assert finish == ["stop"]
    assert usage_seen
    assert fake.requests[0].json["stream"] is True


def test_streaming_error_status_is_plain_http_error(
    fake: FakeOpenAI, client: openai.OpenAI
) -> None:
    fake.script_chat([Status(503)])
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "x"}], stream=True
        )


@pytest.mark.parametrize("encoding_format", ["float", "base64", None])
def test_embeddings_shape_and_determinism(
    fake: FakeOpenAI, client: openai.OpenAI, encoding_format: str | None
) -> None:
    texts = ["I love green tea", "green tea is lovely", "the stock market fell sharply"]
    kwargs: dict[str, Any] = {}
    if encoding_format is not None:
        kwargs["encoding_format"] = encoding_format
    first = client.embeddings.create(model="text-embedding-3-small", input=texts, **kwargs)
    second = client.embeddings.create(model="text-embedding-3-small", input=texts, **kwargs)
    # The SDK asks for base64 by default and decodes it; an explicit "base64" is handed back raw.
    sent = fake.embedding_requests[0].json["encoding_format"]
    assert sent == (encoding_format or "base64")
    if encoding_format == "base64":
        for resp in (first, second):
            for d in resp.data:
                assert isinstance(d.embedding, str)
                d.embedding = np.frombuffer(base64.b64decode(d.embedding), "<f4").tolist()
    assert first.object == "list"
    assert first.model == "text-embedding-3-small"
    assert [d.index for d in first.data] == [0, 1, 2]
    assert all(d.object == "embedding" for d in first.data)
    assert all(len(d.embedding) == 384 for d in first.data)
    assert first.usage.prompt_tokens > 0
    for a, b in zip(first.data, second.data, strict=True):
        assert a.embedding == pytest.approx(b.embedding, abs=1e-6)
    for d in first.data:
        assert cosine(d.embedding, d.embedding) == pytest.approx(1.0)
        assert sum(x * x for x in d.embedding) == pytest.approx(1.0, abs=1e-4)

    tea_a, tea_b, market = (d.embedding for d in first.data)
    related = cosine(tea_a, tea_b)
    unrelated = cosine(tea_a, market)
    assert related > unrelated + 0.15
    assert abs(unrelated) < 0.25


def test_embeddings_single_string_and_dims(fake: FakeOpenAI, client: openai.OpenAI) -> None:
    one = client.embeddings.create(model="m", input="hello world", encoding_format="float")
    assert len(one.data) == 1 and len(one.data[0].embedding) == 384
    fake.embedding_dim = 16
    small = client.embeddings.create(model="m", input="hello world", encoding_format="float")
    assert len(small.data[0].embedding) == 16
    sized = client.embeddings.create(
        model="m", input=["hello world"], dimensions=8, encoding_format="float"
    )
    assert len(sized.data[0].embedding) == 8


def test_embeddings_scripted_error(fake: FakeOpenAI, client: openai.OpenAI) -> None:
    fake.script_embeddings([Status(503)])
    with pytest.raises(openai.InternalServerError):
        client.embeddings.create(model="m", input="x")
    assert len(client.embeddings.create(model="m", input="x").data) == 1
    assert len(fake.embedding_requests) == 2


def test_models_list(fake: FakeOpenAI, client: openai.OpenAI) -> None:
    models = client.models.list()
    assert [m.id for m in models.data] == ["fake-model"]


def test_required_api_key(fake: FakeOpenAI) -> None:
    fake.required_api_key = "sekrit"
    with (
        openai.OpenAI(base_url=fake.base_url, api_key="wrong", max_retries=0) as bad,
        pytest.raises(openai.AuthenticationError),
    ):
        _ask(bad, "hi")
    with openai.OpenAI(base_url=fake.base_url, api_key="sekrit", max_retries=0) as good:
        assert _ask(good, "hi") == "fake reply to: hi"
    assert len(fake.requests) == 2  # rejected requests are recorded too


def test_unknown_route_and_bad_json(fake: FakeOpenAI) -> None:
    with httpx.Client(base_url=fake.url) as http:
        assert http.get("/v1/nope").status_code == 404
        resp = http.post(
            "/v1/chat/completions",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
        assert resp.status_code == 400
        assert resp.json()["error"]["type"] == "invalid_request_error"


def test_reset_clears_script_and_records(fake: FakeOpenAI, client: openai.OpenAI) -> None:
    fake.script_chat([Reply("a"), Reply("b")])
    fake.default_chat = Reply("custom")
    assert _ask(client, "x") == "a"
    fake.reset()
    assert fake.requests == []
    assert fake.pending_chat == 0
    assert _ask(client, "y") == "fake reply to: y"


def test_wait_for_requests(fake: FakeOpenAI, client: openai.OpenAI) -> None:
    _ask(client, "x")
    assert len(fake.wait_for_requests(1, path="/v1/chat/completions", timeout=1)) == 1
    with pytest.raises(TimeoutError):
        fake.wait_for_requests(2, timeout=0.1)


def test_close_is_prompt_with_pending_delay_and_idle_connection() -> None:
    fake = FakeOpenAI().start()
    fake.script_chat([Delay(30, Reply("never"))])
    # Leave a keep-alive connection open and a delayed request in flight.
    http = httpx.Client(base_url=fake.url)
    assert http.get("/v1/models").status_code == 200
    c = openai.OpenAI(base_url=fake.base_url, api_key="x", max_retries=0, timeout=0.2)
    with pytest.raises(openai.APITimeoutError):
        _ask(c, "x")
    started = time.monotonic()
    fake.close()
    assert time.monotonic() - started < 3
    http.close()
    c.close()
