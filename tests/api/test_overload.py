"""Admission control over real HTTP: with MEMWELL_API_MAX_INFLIGHT chat, context and
search requests in flight, the next one is answered 503 `overloaded` with Retry-After
at once, before any of it is done; /healthz and /metrics are still served; the refused
call, sent again on the same connection once there is room, is served.

The requests are held in flight by the model: the app's chat model is the tests' fake
endpoint, whose answer waits for the test to open a gate."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from memwell.core.settings import Settings
from memwell.local.waiting import wait_for
from tests.support.fake_openai import FakeOpenAI, Handler
from tests.support.live_api import serve_api
from tests.support.problems import assert_problem

CAP = 3
METRICS_TOKEN = "overload-test-scrape-token"
COMPLETIONS = "/v1/chat/completions"


@pytest.fixture(scope="module")
def gate() -> threading.Event:
    return threading.Event()


@pytest.fixture(scope="module")
def url(stack_env: dict[str, str], fake_openai: FakeOpenAI, gate: threading.Event) -> Iterator[str]:
    settings = Settings(
        database_url=stack_env["DATABASE_URL"], redis_url=stack_env["REDIS_URL"],
        openai_base_url=fake_openai.base_url, openai_api_key="upstream-key",
        embedding_provider="local", pipeline_mode="local", llm_timeout_s=30,
        api_max_inflight=CAP, metrics_token=METRICS_TOKEN,
        rate_limit_per_s=1000, rate_limit_burst=100_000,
    )  # fmt: skip
    with serve_api(settings) as served:
        yield served


def _chat(user: str, n: int) -> dict[str, str]:
    return {"user_id": user, "session_id": f"session-{n}", "message": f"message number {n}"}


def _session_turns(client: httpx.Client, user: str, n: int) -> list[Any]:
    response = client.get(f"/v1/sessions/session-{n}", params={"user_id": user})
    if response.status_code == 404:
        return []
    assert response.status_code == 200, response.text
    return list(response.json()["buffer"]["turns"])


def test_past_the_cap_requests_are_refused_at_once_and_nothing_of_them_is_done(
    url: str, fake_openai: FakeOpenAI, gate: threading.Event,
    make_key: Callable[..., dict[str, str]], ids: dict[str, str],
) -> None:  # fmt: skip
    headers = make_key(ids["tenant"], ("read", "write"))
    user = ids["user"]
    fake_openai.reset()
    gate.clear()
    fake_openai.default_chat = Handler(lambda _: "a held reply" if gate.wait(30) else "late")
    with ThreadPoolExecutor(CAP) as pool, httpx.Client(base_url=url, headers=headers) as client:
        held = [
            pool.submit(httpx.post, f"{url}/v1/chat", json=_chat(user, n), headers=headers,
                        timeout=60)
            for n in range(CAP)
        ]  # fmt: skip
        wait_for(lambda: len(fake_openai.requests_to(COMPLETIONS)) == CAP, timeout=60,
                 what="the held chats to reach the model")  # fmt: skip

        refused = [client.post("/v1/chat", json=_chat(user, n)) for n in range(CAP, CAP + 4)]
        refused.append(client.post("/v1/memories/search", json={"user_id": user, "query": "x"}))
        refused.append(client.post("/v1/context", json={"user_id": user, "message": "x"}))
        for response in refused:
            body = assert_problem(response, 503, "overloaded")
            assert response.headers["Retry-After"] == "1"
            assert body["retry_after"] == 1 and body["max_inflight"] == CAP
            assert response.headers.get("connection") != "close"
        # Never refused for load: health, metrics, the cheap reads.
        assert client.get("/healthz").status_code == 200
        assert client.get("/v1/sessions", params={"user_id": user}).status_code == 200
        scrape = client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        assert scrape.status_code == 200
        assert 'memwell_api_overloaded_total{path="/v1/chat"}' in scrape.text

        # The refused turns never reached the model, nor the session.
        assert len(fake_openai.requests_to(COMPLETIONS)) == CAP
        assert _session_turns(client, user, CAP) == []
        gate.set()
        assert [f.result().status_code for f in held] == [200] * CAP

        # Sent again (same connection) once there is room: served, and stored once.
        again = client.post("/v1/chat", json=_chat(user, CAP))
        assert again.status_code == 200, again.text
        assert len(_session_turns(client, user, CAP)) == 2
