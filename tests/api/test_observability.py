"""Request ids from the API into the workers' JSON logs, and Prometheus metrics on the
API (/metrics) and on a worker's metrics port (multiprocess mode)."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path

import httpx
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from memwell.core.queues import TaskName
from memwell.intake.dispatch import producer_app
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.live_api import free_port


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
    response = api.get("/metrics")
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


def test_worker_metrics_port_aggregates_pool_processes(
    stack_env: dict[str, str], worker: WorkerProcess, ids: dict[str, str]
) -> None:
    port = free_port()
    queue = f"metrics-probe-{ids['user']}"
    env = {
        **stack_env,
        "MEMWELL_WORKER_METRICS_PORT": str(port),
        "PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp(prefix="memwell-metrics-test-"),
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
