"""The re-embed's doors: the admin REST routes (a tenant re-embeds its own memories),
`memwell reembed status`, `memwell status` and /metrics, all over the same service."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import get_settings
from memwell.local.cli import main
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.fake_openai import FakeOpenAI
from tests.support.reembed_factories import TARGET, TARGET_DIMS, models_of, seed, side_rows

ROUTE = "/v1/admin/reembed"


@pytest.fixture(scope="module")
def offering_api(stack_env: dict[str, str], fake_768: FakeOpenAI) -> Iterator[TestClient]:
    """The API of an operator who offers the 768-d model, on an endpoint of its own."""
    from api.main import create_app

    settings = get_settings().model_copy(
        update={"reembed_targets": f"{TARGET}@{fake_768.base_url}"}
    )
    with TestClient(create_app(settings)) as client:
        yield client


class Listener:
    """A TCP port that counts who connects: proof that nothing was sent there."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def test_a_tenant_cannot_point_a_reembed_at_an_endpoint(
    offering_api: TestClient,
    make_key: Callable[..., dict[str, str]],
    sessions: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    listener = Listener()
    admin = make_key(ids["tenant"], ("admin",))
    try:
        attempts: list[dict[str, Any]] = [
            {"to": TARGET, "base_url": listener.url},
            {"to": "openai:text-embedding-3-small", "api_key": "sk-tenant"},
            {"to": f"openai:fake-embed-768@{listener.url}"},
            {"to": "openai:not-offered"},
        ]
        for body in attempts:
            response = offering_api.post(ROUTE, json=body, headers=admin)
            assert response.status_code == 422, (body, response.text)
            assert response.headers["content-type"] == "application/problem+json"
        offered = offering_api.post(ROUTE, json={"to": "local:nope"}, headers=admin)
        assert offered.status_code == 422
        assert TARGET in offered.json()["detail"]
    finally:
        listener.close()
    assert listener.connections == 0
    with sessions() as session:
        started = session.execute(
            text("SELECT count(*) FROM embedding_migrations WHERE tenant = :t"),
            {"t": ids["tenant"]},
        ).scalar_one()
    assert started == 0


def _scrape(api: TestClient) -> str:
    token = get_settings().metrics_token
    assert token is not None
    response = api.get("/metrics", headers={"Authorization": f"Bearer {token.get_secret_value()}"})
    assert response.status_code == 200
    return response.text


def test_a_tenant_admin_reembeds_its_memories_over_rest(
    maintenance_worker: WorkerProcess,
    offering_api: TestClient,
    make_key: Callable[..., dict[str, str]],
    sessions: sessionmaker[Session],
    tenant_sessions: sessionmaker[Session],
    fake_768: FakeOpenAI,
    ids: dict[str, str],
) -> None:
    api = offering_api
    tenant = ids["tenant"]
    admin, reader = make_key(tenant, ("admin",)), make_key(tenant, ("read", "write"))
    seed(tenant_sessions, tenant, {"gus": 40, "hal": 30})
    body: dict[str, Any] = {"to": TARGET, "batch_size": 25}

    assert api.post(ROUTE, json=body, headers=reader).status_code == 403
    bad = api.post(ROUTE, json=body | {"to": "nonsense"}, headers=admin)
    assert bad.status_code == 422, bad.text
    started = api.post(ROUTE, json=body, headers=admin)
    assert started.status_code == 202, started.text
    assert started.json()["tenant"] == tenant and started.json()["total"] == 70
    assert api.post(ROUTE, json=body, headers=admin).status_code == 409
    assert api.post(f"{ROUTE}/pause", headers=admin).json()["state"] == "paused"
    assert api.post(f"{ROUTE}/finish", json={}, headers=admin).status_code == 409
    assert api.post(f"{ROUTE}/resume", headers=admin).json()["state"] == "running"

    def state() -> str:
        response = api.get(ROUTE, headers=admin)
        assert response.status_code == 200, response.text
        return str(response.json()["state"])

    wait_for(lambda: state() == "ready", timeout=120, what="ready")
    metrics = _scrape(api)
    assert f'memwell_reembed_rows{{state="ready",target="{TARGET}"}} 70.0' in metrics

    cli = CliRunner().invoke(main, ["reembed", "status", "--json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.output)["state"] == "ready"
    screen = CliRunner().invoke(main, ["status"])
    assert "Re-embed" in screen.output and "ready" in screen.output

    finished = api.post(f"{ROUTE}/finish", json={"grace_s": 0}, headers=admin)
    assert finished.status_code == 200, finished.text
    wait_for(
        lambda: api.get(ROUTE, headers=admin).json()["old_dropped_at"] is not None,
        timeout=60,
        what="the old vectors' drop",
    )
    assert models_of(sessions, tenant) == {(TARGET, TARGET_DIMS): 70}
    assert side_rows(sessions, tenant) == 0
    # Finished: nothing is in flight, so there is nothing to pause.
    assert api.post(f"{ROUTE}/pause", headers=admin).status_code == 404
