"""API keys: tenant-bound, scoped, revocable; auth can be off only explicitly; a
rate limit per key answers 429 with Retry-After."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from api.main import create_app
from memwell.auth.keys import hash_key
from memwell.core.settings import Settings
from memwell.db.models import ApiKey
from memwell.local.cli import main as cli
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.problems import PROBLEM, assert_problem

KeyMaker = Callable[..., dict[str, str]]


@pytest.fixture(scope="module")
def bare(stack_env: dict[str, str]) -> TestClient:
    """A client that sends no key of its own."""
    from memwell.core.settings import get_settings

    with TestClient(create_app(get_settings())) as client:
        yield client  # type: ignore[misc]


def test_missing_and_unknown_keys_are_401_problems(bare: TestClient) -> None:
    response = bare.get("/v1/turns/x")
    assert_problem(response, 401, "unauthorized")
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert_problem(
        bare.get("/v1/turns/x", headers={"Authorization": "Bearer mw_not-a-real-key"}),
        401,
        "unauthorized",
    )
    assert_problem(
        bare.get("/v1/turns/x", headers={"Authorization": "Basic dXNlcjpwdw=="}),
        401,
        "unauthorized",
    )
    assert bare.get("/healthz").status_code == 200


def test_scopes_decide_what_a_key_may_do(bare: TestClient, make_key: KeyMaker) -> None:
    reader = make_key("default", ("read",))
    writer = make_key("default", ("write",))
    assert bare.get("/v1/turns/x", headers=reader).json()["status"] == "unknown"
    chat = {"user_id": "u", "session_id": "s", "message": "hi"}
    assert_problem(bare.post("/v1/chat", json=chat, headers=reader), 403, "forbidden")
    assert_problem(bare.delete("/v1/users/u", headers=writer), 403, "forbidden")
    assert_problem(bare.get("/v1/turns/x", headers=writer), 403, "forbidden")


def test_key_binds_the_tenant_and_the_body_cannot_override_it(
    bare: TestClient, make_key: KeyMaker, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    mine = make_key(ids["tenant"], ("read", "write"))
    theirs = make_key(ids["tenant"] + "-other", ("read", "write"))
    turn = {"id": "shared-id", "user_id": "u", "session_id": "s", "content": "my secret"}
    # An extra "tenant" field is refused, not obeyed.
    assert_problem(
        bare.post("/v1/turns", json={"turns": [turn], "tenant": "x"}, headers=mine),
        422,
        "invalid-input",
    )
    assert bare.post("/v1/turns", json={"turns": [turn]}, headers=mine).status_code == 202
    wait_for(
        lambda: bare.get("/v1/turns/shared-id", headers=mine).json()["status"] == "processed",
        timeout=60,
    )
    assert bare.get("/v1/turns/shared-id", headers=theirs).json()["status"] == "unknown"


def test_keys_cli_create_list_revoke(
    bare: TestClient, stack_env: dict[str, str], db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    runner = CliRunner()
    created = runner.invoke(
        cli, ["keys", "create", "--tenant", ids["tenant"], "--name", "ci", "--scope", "read"]
    )
    assert created.exit_code == 0, created.output
    key = created.stdout.strip().splitlines()[0]
    assert key.startswith("mw_") and len(key) > 40
    with db() as session:
        row = session.scalars(select(ApiKey).where(ApiKey.tenant == ids["tenant"])).one()
    # Only the hash and a short display prefix are stored.
    assert row.key_hash == hash_key(key) and key not in (row.key_hash, row.prefix)
    assert key.startswith(row.prefix) and len(row.prefix) < 16

    listed = runner.invoke(cli, ["keys", "list", "--tenant", ids["tenant"]])
    assert row.prefix in listed.stdout and key not in listed.stdout and "live" in listed.stdout

    headers = {"Authorization": f"Bearer {key}"}
    assert bare.get("/v1/turns/x", headers=headers).status_code == 200
    revoked = runner.invoke(cli, ["keys", "revoke", str(row.id)])
    assert revoked.exit_code == 0, revoked.output
    # The API trusts a key it saw for MEMWELL_AUTH_CACHE_S (5 s) at most.
    wait_for(
        lambda: bare.get("/v1/turns/x", headers=headers).status_code == 401,
        timeout=15,
        what="the revoked key to be refused",
    )
    assert_problem(bare.get("/v1/turns/x", headers=headers), 401, "unauthorized")


def test_auth_disabled_only_explicitly_and_with_a_warning(
    stack_env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(
        database_url=stack_env["DATABASE_URL"],
        redis_url=stack_env["REDIS_URL"],
        auth_disabled=True,
        embedding_provider="local",
    )
    assert Settings().auth_disabled is False  # the default is on
    with caplog.at_level(logging.WARNING), TestClient(create_app(settings)) as client:
        assert client.get("/v1/turns/x").json()["status"] == "unknown"
    assert any("AUTH IS DISABLED" in r.getMessage() for r in caplog.records)


def test_rate_limit_per_key_is_a_429_with_retry_after(
    stack_env: dict[str, str], make_key: KeyMaker, ids: dict[str, str]
) -> None:
    settings = Settings(
        database_url=stack_env["DATABASE_URL"],
        redis_url=stack_env["REDIS_URL"],
        embedding_provider="local",
        rate_limit_per_s=0.5,
        rate_limit_burst=3,
    )
    first, second = make_key(ids["tenant"], ("read",)), make_key(ids["tenant"], ("read",))
    with TestClient(create_app(settings)) as client:
        codes = [client.get("/v1/turns/x", headers=first).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        limited = client.get("/v1/turns/x", headers=first)
        body = assert_problem(limited, 429, "rate-limited")
        assert limited.headers["content-type"].startswith(PROBLEM)
        assert 1 <= int(limited.headers["retry-after"]) <= 2
        assert "rate limit" in body["detail"]
        # Buckets are per key: another key of the same tenant is unaffected.
        assert client.get("/v1/turns/x", headers=second).status_code == 200
