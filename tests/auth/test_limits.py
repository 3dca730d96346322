"""Hostile input: one test per limit, plus malformed bodies. Every answer is a 4xx
problem+json; nothing is enqueued."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from memwell.core.settings import Settings
from memwell.intake.turns import MAX_BATCH_TURNS, MAX_CONTENT_CHARS, MAX_METADATA_BYTES
from tests.support.problems import assert_problem


@pytest.fixture(scope="module")
def tight(stack_env: dict[str, str], auth_headers: dict[str, str]) -> Iterator[TestClient]:
    """An app whose operator set limits below the schema's hard caps."""
    settings = Settings(
        database_url=stack_env["DATABASE_URL"],
        redis_url=stack_env["REDIS_URL"],
        embedding_provider="local",
        max_message_chars=100,
        max_batch_turns=3,
        max_metadata_bytes=64,
        max_body_bytes=4096,
    )
    with TestClient(create_app(settings), headers=auth_headers) as client:
        yield client


OK_TURN = b'{"turns": [{"user_id": "u", "session_id": "s", "content": "ok"'


def _turn(**overrides: Any) -> dict[str, Any]:
    return {"user_id": "u", "session_id": "s", "content": "hello", **overrides}


def test_message_size_hard_cap_is_422(api: TestClient) -> None:
    body = {"user_id": "u", "session_id": "s", "message": "x" * (MAX_CONTENT_CHARS + 1)}
    assert_problem(api.post("/v1/chat", json=body), 422, "invalid-input")
    turns = {"turns": [_turn(content="x" * (MAX_CONTENT_CHARS + 1))]}
    assert_problem(api.post("/v1/turns", json=turns), 422, "invalid-input")


def test_message_size_setting_is_413(tight: TestClient, ids: dict[str, str]) -> None:
    body = {"user_id": "u", "session_id": "s", "message": "x" * 101}
    problem = assert_problem(tight.post("/v1/chat", json=body), 413, "too-large")
    assert "limit is 100" in problem["detail"]
    assert_problem(
        tight.post("/v1/turns", json={"turns": [_turn(content="y" * 101)]}), 413, "too-large"
    )
    memories = {"user_id": ids["user"], "memories": [{"content": "ok"}, {"content": "z" * 101}]}
    problem = assert_problem(tight.post("/v1/memories", json=memories), 413, "too-large")
    assert "memories[1].content" in problem["detail"]
    listed = tight.get("/v1/memories", params={"user_id": ids["user"]}).json()
    assert listed["total"] == 0  # refused whole: not even the first memory was stored


def test_batch_size_hard_cap_is_422(api: TestClient) -> None:
    turns = {"turns": [_turn() for _ in range(MAX_BATCH_TURNS + 1)]}
    problem = assert_problem(api.post("/v1/turns", json=turns), 422, "invalid-input")
    assert problem["errors"][0]["loc"] == ["body", "turns"]
    assert_problem(api.post("/v1/turns", json={"turns": []}), 422, "invalid-input")


def test_batch_size_setting_is_413(tight: TestClient) -> None:
    problem = assert_problem(
        tight.post("/v1/turns", json={"turns": [_turn() for _ in range(4)]}), 413, "too-large"
    )
    assert "limit is 3" in problem["detail"]


def test_metadata_size_hard_cap_is_422(api: TestClient) -> None:
    big = {"blob": "z" * MAX_METADATA_BYTES}
    assert_problem(
        api.post("/v1/turns", json={"turns": [_turn(metadata=big)]}), 422, "invalid-input"
    )


def test_metadata_size_setting_is_413(tight: TestClient) -> None:
    problem = assert_problem(
        tight.post("/v1/turns", json={"turns": [_turn(metadata={"k": "v" * 80})]}),
        413,
        "too-large",
    )
    assert "metadata" in problem["detail"]


def test_body_over_byte_limit_is_refused_from_content_length(tight: TestClient) -> None:
    payload = b'{"turns": [' + b" " * 5000 + b"]}"
    response = tight.post(
        "/v1/turns", content=payload, headers={"content-type": "application/json"}
    )
    assert_problem(response, 413, "too-large")


def test_streamed_body_over_byte_limit_is_cut_off(tight: TestClient) -> None:
    def chunks() -> Iterator[bytes]:  # chunked: no Content-Length to check up front
        for _ in range(1000):
            yield b" " * 1024

    response = tight.post(
        "/v1/turns", content=chunks(), headers={"content-type": "application/json"}
    )
    assert_problem(response, 413, "too-large")


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"user_id": "u", "session_id": "s", "message": "a\x00b"}, "message"),
        ({"user_id": "u", "session_id": "s", "message": ""}, "message"),
        ({"user_id": "", "session_id": "s", "message": "hi"}, "user_id"),
        ({"user_id": "u\n", "session_id": "s", "message": "hi"}, "user_id"),
        ({"user_id": 7, "session_id": "s", "message": "hi"}, "user_id"),
        ({"user_id": "u", "session_id": ["s"], "message": "hi"}, "session_id"),
        ({"user_id": "u", "session_id": "s", "message": {"text": "hi"}}, "message"),
    ],
)
def test_malformed_chat_fields_are_422(api: TestClient, body: dict[str, Any], where: str) -> None:
    problem = assert_problem(api.post("/v1/chat", json=body), 422, "invalid-input")
    assert problem["errors"][0]["loc"][-1] == where


@pytest.mark.parametrize(
    "raw",
    [
        # A lone surrogate, legal as a JSON escape, not as UTF-8 text.
        b'{"turns": [{"user_id": "u", "session_id": "s", "content": "a\\ud800b"}]}',
        OK_TURN + b', "metadata": {"a": NaN}}]}',
        OK_TURN + b', "metadata": {"a": "\\u0000"}}]}',
        OK_TURN + b', "created_at": "0001-01-01T00:00:00Z"}]}',
        OK_TURN + b', "created_at": "2999-01-01T00:00:00Z"}]}',
        OK_TURN + b', "created_at": "yesterday"}]}',
        OK_TURN + b', "role": "root"}]}',
        b'{"turns": "all of them"}',
        b"[1, 2, 3]",
        b"{not json",
    ],
)
def test_malformed_turn_batches_are_422(api: TestClient, raw: bytes) -> None:
    response = api.post("/v1/turns", content=raw, headers={"content-type": "application/json"})
    assert_problem(response, 422, "invalid-input")


def test_invalid_utf8_body_is_a_4xx_problem(api: TestClient) -> None:
    raw = b'{"user_id": "u", "session_id": "s", "message": "caf\xe9"}'
    response = api.post("/v1/chat", content=raw, headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500
    assert response.headers["content-type"].startswith("application/problem+json")


def test_control_characters_in_path_ids_are_422(api: TestClient) -> None:
    assert_problem(api.get("/v1/turns/a%00b"), 422, "invalid-input")
    assert_problem(api.delete("/v1/users/a%0Ab"), 422, "invalid-input")
    assert_problem(api.get("/v1/turns/" + "x" * 201), 422, "invalid-input")
