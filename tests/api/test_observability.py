"""Request ids from the API into the workers' JSON logs, and Prometheus metrics on the
API (/metrics) and on a worker's metrics port (multiprocess mode)."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import delete
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.queues import TaskName
from memwell.core.settings import get_settings
from memwell.db.models import DeadLetter, Turn
from memwell.intake.dead_letters import record_dead_letter
from memwell.intake.dispatch import producer_app
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from memwell.maintenance.status import StackStatus, read_store
from tests.support.live_api import free_port


def _scrape(api: TestClient) -> httpx.Response:
    token = get_settings().metrics_token
    assert token is not None
    return api.get("/metrics", headers={"Authorization": f"Bearer {token.get_secret_value()}"})


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, dict(s.labels), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def _json_lines(path: Path) -> list[dict[str, object]]:
    lines = []
    for raw in path.read_text(errors="replace").splitlines():
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict):
            lines.append(value)
    return lines


def test_request_id_is_echoed_and_reaches_the_worker_logs(
    api: TestClient, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    request_id = f"req-{uuid.uuid4().hex[:12]}"
    turn = {"id": f"t-{ids['user']}", "user_id": ids["user"], "session_id": "s", "content": "hi"}
    response = api.post("/v1/turns", json={"turns": [turn]}, headers={"X-Request-ID": request_id})
    assert response.status_code == 202
    assert response.headers["X-Request-ID"] == request_id

    def worker_lines() -> list[dict[str, object]]:
        return [
            line
            for line in _json_lines(worker.log_path)
            if line.get("request_id") == request_id and line.get("event") == "task finished"
        ]

    # The API persists the turns itself (the outbox) and dispatches their consolidation
    # with the request id in a header.
    lines = wait_for(worker_lines, timeout=60)
    consolidate = next(line for line in lines if line["task"] == TaskName.CONSOLIDATE_TURNS.value)
    assert consolidate["outcome"] == "success" and turn["id"] in consolidate["turn_ids"]


def test_api_makes_a_request_id_when_the_client_sends_none_or_garbage(api: TestClient) -> None:
    made = api.get("/healthz").headers["X-Request-ID"]
    assert len(made) == 32
    replaced = api.get("/healthz", headers={"X-Request-ID": "bad id\twith spaces"})
    assert replaced.headers["X-Request-ID"] != "bad id\twith spaces"


def test_api_metrics_expose_routes_chat_stages_and_queue_depths(
    api: TestClient, ids: dict[str, str]
) -> None:
    api.post("/v1/chat", json={"user_id": ids["user"], "session_id": "s", "message": "hello"})
    api.get("/v1/turns/some-turn-id")
    response = _scrape(api)
    assert response.status_code == 200
    samples = _samples(response.text)
    routes = {
        labels["route"]
        for name, labels, _ in samples
        if name == "memwell_http_request_duration_seconds_count"
    }
    assert {"/v1/chat", "/v1/turns/{turn_id}"} <= routes  # templates, not raw paths
    stages = {
        labels["stage"]
        for name, labels, value in samples
        if name == "memwell_chat_stage_duration_seconds_count" and value > 0
    }
    assert {"buffer", "embed", "retrieve", "assemble", "model", "enqueue"} <= stages
    queues = {labels["queue"] for name, labels, _ in samples if name == "memwell_queue_depth"}
    assert queues == {"ingest", "embed", "llm", "maintenance"}
    assert any(
        name == "memwell_embeddings_total" and labels["use"] == "query"
        for name, labels, _ in samples
    )
    names = {name for name, _, _ in samples}
    assert {
        "memwell_backlog_pending_turns",
        "memwell_backlog_oldest_pending_seconds",
        "memwell_dead_letters_open",
    } <= names


def test_api_metrics_need_the_scrape_token(api: TestClient) -> None:
    token = get_settings().metrics_token
    assert token is not None
    assert api.get("/metrics", headers={"Authorization": ""}).status_code == 401
    # An API key is no scrape token: the metrics count every tenant's work.
    assert api.get("/metrics").status_code == 401
    wrong = api.get("/metrics", headers={"Authorization": "Bearer not-the-token-at-all"})
    assert wrong.status_code == 401
    assert wrong.headers["Content-Type"] == "application/problem+json"
    assert _scrape(api).status_code == 200


def test_api_metrics_are_off_without_a_token_unless_auth_is_disabled(
    stack_env: dict[str, str],
) -> None:
    from api.main import create_app

    settings = get_settings().model_copy(update={"metrics_token": None})
    with TestClient(create_app(settings)) as client:
        assert client.get("/metrics").status_code == 404
        assert client.get("/metrics", headers={"Authorization": "Bearer x"}).status_code == 404
    local = settings.model_copy(update={"auth_disabled": True})
    with TestClient(create_app(local)) as client:
        assert client.get("/metrics").status_code == 200


def test_worker_metrics_port_aggregates_pool_processes(
    stack_env: dict[str, str], worker: WorkerProcess, ids: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    queue = f"metrics-probe-{ids['user']}"
    env = {
        **stack_env,
        "MEMWELL_WORKER_METRICS_PORT": str(port),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
    }
    probe = WorkerProcess(env, concurrency=2, name="metrics", queues=queue)
    probe.start()
    try:
        app = producer_app(stack_env["REDIS_URL"])
        for i in range(4):
            turn = {"user_id": ids["user"], "session_id": "s", "content": f"fact {i}"}
            payload = {"v": 1, "tenant": ids["tenant"], "turns": [turn]}
            app.send_task(TaskName.INGEST_TURNS.value, kwargs={"payload": payload}, queue=queue)

        def ingested() -> list[tuple[str, dict[str, str], float]] | None:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            samples = _samples(text)
            done = sum(
                value
                for name, labels, value in samples
                if name == "memwell_tasks_total"
                and labels == {"task": TaskName.INGEST_TURNS.value, "outcome": "success"}
            )
            return samples if done >= 4 else None

        samples = wait_for(ingested, timeout=60, interval=0.3, what="4 ingest tasks in metrics")
        assert any(
            name == "memwell_task_duration_seconds_count"
            and labels["task"] == TaskName.INGEST_TURNS.value
            for name, labels, _ in samples
        )
        assert any(name == "memwell_queue_depth" for name, _, _ in samples)
        # The tasks ran in pool children: their samples came through the shared directory.
        assert os.listdir(env["PROMETHEUS_MULTIPROC_DIR"])
    finally:
        probe.stop()


def test_metrics_backlog_gauges_equal_memwell_status(
    api: TestClient, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    """The gauges count every tenant's backlog, as `memwell status` does: read through
    a tenant-scoped session, row-level security would hide every row."""
    tenant = ids["tenant"]
    with db.begin() as session:
        for i in range(3):
            session.add(
                Turn(
                    tenant=tenant, id=f"pending-{i}", user_id=ids["user"], session_id="s",
                    role="user", content="waiting", created_at=datetime.now(UTC), token_count=1,
                )
            )  # fmt: skip
        letter = record_dead_letter(
            session, task_name="memwell.ingest_turns", payload={}, error="probe", tenant=tenant
        )
    try:

        def both() -> tuple[StackStatus, dict[str, float]] | None:
            before = StackStatus()
            read_store(before, db)
            gauges = {n: v for n, _, v in _samples(_scrape(api).text)}
            after = StackStatus()
            read_store(after, db)
            stable = (before.pending_turns, before.dead_letters_open) == (
                after.pending_turns,
                after.dead_letters_open,
            )
            return (after, gauges) if stable else None

        found = wait_for(both, timeout=30, what="a quiet store between two reads")
        assert found is not None
        status, gauges = found
        assert status.pending_turns >= 3 and status.dead_letters_open >= 1
        assert gauges["memwell_backlog_pending_turns"] == status.pending_turns
        assert gauges["memwell_dead_letters_open"] == status.dead_letters_open
    finally:
        with db.begin() as session:
            session.execute(delete(Turn).where(Turn.tenant == tenant))
            session.execute(delete(DeadLetter).where(DeadLetter.id == letter))
