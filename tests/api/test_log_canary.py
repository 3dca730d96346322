"""No log line carries a user's text: a canary string goes in through every door that
takes content (REST turns, memories, chat, search, context, the OpenAI door, the
Redis producer, poison payloads, invalid requests), a real worker consolidates what
is valid and dead-letters what is not, and then every log captured is searched for
it: the API's (in this process, at DEBUG, through logging and the raw stderr and
stdout) and the worker's log file."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest
import redis
import uvicorn
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session, sessionmaker

import memwell
from api.main import create_app
from api.server import server_config
from memwell.core.queues import Queue, TaskName
from memwell.core.settings import Settings
from memwell.db.models import DeadLetter, Turn
from memwell.intake.dispatch import producer_app
from memwell.intake.task_message import task_message
from memwell.intake.turns import MAX_CONTENT_CHARS
from memwell.local.waiting import broker_idle, wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.fake_openai import FakeOpenAI
from tests.support.live_api import free_port


@pytest.fixture(scope="module")
def app_with_model(stack_env: dict[str, str], fake_openai: FakeOpenAI) -> Iterator[TestClient]:
    """The API with a model behind it (the fake upstream), so chat and the OpenAI door
    run their whole path; consolidation stays local."""
    settings = Settings(
        database_url=stack_env["DATABASE_URL"], redis_url=stack_env["REDIS_URL"],
        openai_base_url=fake_openai.base_url, openai_api_key="upstream-key",
        embedding_provider="local", llm_timeout_s=5, pipeline_mode="local",
        rate_limit_per_s=1000, rate_limit_burst=100_000, log_level="DEBUG",
    )  # fmt: skip
    with TestClient(create_app(settings)) as client:
        yield client


def _send_everywhere(
    api: TestClient, headers: dict[str, str], stack_env: dict[str, str], tenant: str,
    user: str, canary: str,
) -> list[str]:  # fmt: skip
    """The canary through every door; returns the ids of the turns that were accepted."""
    meta = {"note": f"{canary}-meta"}
    accepted = []
    turn = {"user_id": user, "session_id": "s1", "content": f"{canary} turn", "metadata": meta}
    turns = api.post("/v1/turns", headers=headers, json={"turns": [turn]})
    assert turns.status_code == 202, turns.text
    accepted += turns.json()["turn_ids"]
    message = {"user_id": user, "session_id": "s2", "message": f"{canary} chat"}
    chat = api.post("/v1/chat", headers=headers, json=message)
    assert chat.status_code == 200, chat.text
    accepted += chat.json()["turn_ids"]
    completion = {
        "model": "gpt-4o-mini",
        "user": user,
        "messages": [{"role": "user", "content": f"{canary} openai door"}],
    }
    door_headers = {**headers, "X-Memwell-Session": "s3"}
    door = api.post("/v1/chat/completions", headers=door_headers, json=completion)
    assert door.status_code == 200, door.text
    memory = {"content": f"{canary} memory", "metadata": meta}
    added = api.post("/v1/memories", headers=headers, json={"user_id": user, "memories": [memory]})
    assert added.status_code == 200, added.text
    for path, extra in (("/v1/memories/search", {}), ("/v1/context", {"session_id": "s1"})):
        found = api.post(path, headers=headers,
                         json={"user_id": user, "query": f"{canary} query", **extra})  # fmt: skip
        assert found.status_code == 200, found.text
    accepted.append(memwell.enqueue_turn(user_id=user, session_id="s4", tenant=tenant,
                                         content=f"{canary} producer", metadata=meta))  # fmt: skip
    # Refused input: wrong types, an unknown field, malformed JSON, a NUL.
    invalid = [
        {"turns": [{"user_id": user, "session_id": 7, "content": f"{canary} bad",
                    "metadata": {"k": f"{canary}-meta"}, "extra": canary}]},
        {"turns": [{"user_id": f"{canary}\x00", "session_id": "s", "content": canary}]},
    ]  # fmt: skip
    for body in invalid:
        assert api.post("/v1/turns", headers=headers, json=body).status_code == 422
    malformed = api.post("/v1/chat", headers={**headers, "Content-Type": "application/json"},
                         content=f'{{"message": "{canary}",'.encode())  # fmt: skip
    assert malformed.status_code == 422
    # Poison payloads straight onto the queue: a worker validates and dead-letters them.
    for payload in (
        {"v": 1, "tenant": tenant, "turns": [{"user_id": user, "session_id": "s",
         "content": f"{canary}\x00 poison", "metadata": meta, "unknown": canary}]},
        {"v": 1, "tenant": tenant, "turns": [{"user_id": user, "session_id": "s",
         "content": f"{canary} poison", "metadata": f"{canary}-not-a-dict"}]},
    ):  # fmt: skip
        producer_app(stack_env["REDIS_URL"]).send_task(
            TaskName.INGEST_TURNS, kwargs={"payload": payload}, queue=Queue.INGEST
        )
    # Streamed and over the limit, at both doors that stream: refused before the stream.
    over = f"{canary} " + "x" * MAX_CONTENT_CHARS
    streamed = {"model": "m", "user": user, "stream": True,
                "messages": [{"role": "user", "content": over}]}  # fmt: skip
    assert api.post("/v1/chat/completions", headers=door_headers, json=streamed).status_code == 400
    over_chat = {"user_id": user, "session_id": "s5", "message": over, "stream": True}
    assert api.post("/v1/chat", headers=headers, json=over_chat).status_code == 422
    return accepted


def _send_undecodable(redis_url: str, tenant: str, canary: str) -> str:
    """A raw producer's message whose body is not UTF-8; returns its task id."""
    kwargs = (
        b'{"payload": {"v": 1, "tenant": "' + tenant.encode() + b'", "turns": [{"user_id": '
        b'"u", "session_id": "s", "content": "' + canary.encode() + b' raw \xff"}]}}'
    )
    task_id, message = task_message(TaskName.INGEST_TURNS, kwargs, Queue.INGEST)
    redis.Redis.from_url(redis_url).lpush(Queue.INGEST.value, message)
    return task_id


def test_no_log_carries_the_canary(
    app_with_model: TestClient,
    worker: WorkerProcess,
    make_key: Callable[..., dict[str, str]],
    db: sessionmaker[Session],
    stack_env: dict[str, str],
    ids: dict[str, str],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    tenant, user = ids["tenant"], ids["user"]
    canary = f"CANARY{uuid.uuid4().hex}"
    headers = make_key(tenant, ("read", "write"))
    worker_log_start = worker.log_path.stat().st_size

    accepted = _send_everywhere(app_with_model, headers, stack_env, tenant, user, canary)
    raw_id = _send_undecodable(stack_env["REDIS_URL"], tenant, canary)

    def settled() -> bool:
        with db() as session:
            statuses = session.scalars(
                select(Turn.status).where(Turn.tenant == tenant, Turn.id.in_(accepted))
            ).all()
            letters = session.scalars(
                select(DeadLetter.id).where(DeadLetter.tenant == tenant)
            ).all()
            raw = session.scalars(
                select(DeadLetter.id).where(DeadLetter.payload["message_id"].astext == raw_id)
            ).all()
        done = sorted(statuses) == ["processed"] * len(accepted)
        return done and len(letters) == 2 and len(raw) == 1

    wait_for(settled, timeout=120, what="the turns to be processed and the poison dead-lettered")
    wait_for(lambda: broker_idle(stack_env["REDIS_URL"]), timeout=60, what="queues to drain")

    captured = capfd.readouterr()
    api_logs = "\n".join([caplog.text, captured.out, captured.err])
    with worker.log_path.open("rb") as log:
        log.seek(worker_log_start)
        worker_log = log.read().decode(errors="replace")
    # The logs did record this test's work: the search below looks at the right text.
    assert "POST" in api_logs or "/v1/" in api_logs
    assert "ingest_turns" in worker_log
    assert canary not in api_logs, _context(api_logs, canary)
    assert canary not in worker_log, _context(worker_log, canary)


def _context(text: str, needle: str) -> str:
    at = text.index(needle)
    return text[max(0, at - 300) : at + 100]


def test_an_unexpected_error_is_logged_without_the_values_it_carries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from pydantic import BaseModel

    from api.redaction import log_error

    class Turn(BaseModel):
        count: int

    canary = f"CANARY{uuid.uuid4().hex}"
    errors: list[Exception] = []
    try:
        Turn.model_validate({"count": canary})
    except ValidationError as exc:
        errors.append(exc)
    errors.append(
        StatementError("insert failed", "INSERT INTO turns VALUES (%s)", (canary,), ValueError())
    )
    errors.append(RuntimeError(f"unexpected {canary}"))
    caplog.set_level(logging.INFO)
    for exc in errors:
        log_error(logging.getLogger("memwell.test"), "unhandled error", exc)
    assert "count: Input should be a valid integer" in caplog.text  # where and why stay
    assert "StatementError" in caplog.text and "RuntimeError" in caplog.text
    assert canary not in caplog.text


def test_the_server_logs_an_escaped_exception_without_its_values(
    stack_env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """Starlette answers 500 and re-raises; uvicorn then logs the exception, whose
    text may quote a statement's parameters. That log is redacted too."""
    canary = f"CANARY{uuid.uuid4().hex}"
    settings = Settings(
        database_url=stack_env["DATABASE_URL"], redis_url=stack_env["REDIS_URL"],
        embedding_provider="local",
    )  # fmt: skip
    app = create_app(settings)

    async def boom() -> None:
        raise StatementError("insert failed", "INSERT INTO turns VALUES (%s)", (canary,), None)

    app.add_api_route("/boom", boom)
    port = free_port()
    server = uvicorn.Server(server_config(settings, host="127.0.0.1", port=port, app=app))
    thread = threading.Thread(target=server.run, daemon=True)
    caplog.set_level(logging.INFO)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=60, what="uvicorn to start")
        assert httpx.get(f"http://127.0.0.1:{port}/boom").status_code == 500
        wait_for(lambda: "Exception in ASGI application" in caplog.text, timeout=10)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
    assert "StatementError" in caplog.text
    assert canary not in caplog.text
