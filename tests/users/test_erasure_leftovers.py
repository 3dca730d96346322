"""Erasure reaches what lies outside the user's own rows, in the same request: dead
letters without a tenant, the per-user ANN indexes and their registry, the user's
turns in the enqueue inbox and in queued ingest messages; the receipt counts each;
the tombstone is an HMAC under the server's secret."""

from __future__ import annotations

import base64
import hashlib
import hmac
import stat
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import redis
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, pool, select, text
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.queues import Queue
from memwell.db.models import DeadLetter, UserErasure
from memwell.db.tenancy import make_tenant_sessionmaker, tenant_transaction
from memwell.intake.dead_letters import record_dead_letter
from memwell.intake.dispatch import send_ingest_json
from memwell.intake.redis_inbox import INBOX_KEY
from memwell.intake.turns import IngestPayload
from memwell.memories.erasure import erase_user, erasures_of
from memwell.memories.tombstones import SECRET_FILE, legacy_user_hash, user_hash
from memwell.retrieval.ann import index_name, text_index_name

MODEL = "test-model"


def _payload(tenant: str, *users: str) -> bytes:
    turns = [{"user_id": u, "session_id": "s", "content": f"{u} says hi"} for u in users]
    return orjson.dumps({"v": 1, "tenant": tenant, "turns": turns})


def _queued_payloads(client: redis.Redis) -> list[dict[str, Any]]:
    payloads = []
    for raw in client.lrange(Queue.INGEST.value, 0, -1):
        _, kwargs, _ = orjson.loads(base64.b64decode(orjson.loads(raw)["body"]))
        payloads.append(kwargs["payload"])
    return payloads


def _owners(payloads: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((p["tenant"], t["user_id"]) for p in payloads for t in p["turns"])


def test_queued_and_inbox_turns_of_the_user_are_purged(
    stack_env: dict[str, str], database_url: str, ids: dict[str, str]
) -> None:
    # A broker database of its own: no worker consumes it, so what erasure leaves is
    # exactly what a worker would later find.
    broker_url = stack_env["REDIS_URL"].rsplit("/", 1)[0] + "/9"
    client = redis.Redis.from_url(broker_url)
    client.flushdb()
    tenant, victim, bystander = ids["tenant"], "victim-" + ids["user"], ids["user"]
    send_ingest_json(
        [_payload(tenant, victim, bystander), _payload(tenant, victim),
         _payload(tenant, bystander), _payload(tenant + "-other", victim)],
        broker_url=broker_url,
    )  # fmt: skip
    before = _owners(_queued_payloads(client))
    assert before.count((tenant, victim)) == 2

    maker = make_tenant_sessionmaker(create_engine(database_url, poolclass=pool.NullPool))
    with tenant_transaction(maker, tenant) as session:
        receipt = erase_user(session, client, tenant=tenant, user_id=victim)
    assert receipt.counts["queued_messages"] == 2 and receipt.counts["inbox_entries"] == 2

    expected = [(tenant, bystander), (tenant, bystander), (tenant + "-other", victim)]
    queued = _queued_payloads(client)
    assert _owners(queued) == sorted(expected)
    for payload in queued:  # what a worker will receive is still a valid ingest payload
        IngestPayload.model_validate(payload)
    inbox = [orjson.loads(v) for v in client.hvals(INBOX_KEY)]
    assert _owners(inbox) == sorted(expected)
    client.flushdb()


def _make_user_indexes(session: Session, tenant: str, user_id: str) -> list[str]:
    """A registered per-user index pair, as the maintenance job would leave it."""
    names = [index_name(tenant, user_id, MODEL), text_index_name(tenant, user_id, MODEL)]
    for name in names:
        session.execute(text(
            f'CREATE INDEX "{name}" ON memories (id) '
            f"WHERE tenant = '{tenant}' AND user_id = '{user_id}'"
        ))  # fmt: skip
    session.execute(
        text("INSERT INTO memory_ann_indexes (tenant, user_id, embedding_model, index_name, "
             "dims, rows_at_build) VALUES (:t, :u, :m, :n, 384, 60000)"),
        {"t": tenant, "u": user_id, "m": MODEL, "n": names[0]},
    )  # fmt: skip
    return names


def _existing_indexes(session: Session, names: list[str]) -> list[str]:
    found = session.scalars(
        text("SELECT indexname FROM pg_indexes WHERE indexname = ANY(:n)"), {"n": names}
    )
    return list(found.all())


def test_erasure_drops_tenantless_dead_letters_and_the_users_indexes(
    api: TestClient,
    db: sessionmaker[Session],
    make_key: Callable[..., dict[str, str]],
    ids: dict[str, str],
) -> None:
    tenant, victim = ids["tenant"], "victim-" + ids["user"]
    secret = f"my pin is {uuid.uuid4().hex[:8]}"
    with db.begin() as session:
        letters = {
            name: record_dead_letter(
                session,
                task_name="memwell.ingest_turns",
                tenant=None,
                error="poison",
                payload={"payload": {**body, "turns": [{"user_id": user, "content": secret}]}},
            )  # fmt: skip
            for name, body, user in (
                ("no tenant", {}, victim),
                ("same tenant", {"tenant": tenant}, victim),
                ("other tenant", {"tenant": tenant + "-other"}, victim),
                ("other user", {}, ids["user"]),
            )
        }
        names = _make_user_indexes(session, tenant, victim)
    with db() as session:
        assert sorted(_existing_indexes(session, names)) == sorted(names)

    response = api.delete(f"/v1/users/{victim}", headers=make_key(tenant, ("admin",)))
    assert response.status_code == 200, response.text
    counts = response.json()["counts"]
    assert counts["dead_letters_without_tenant"] == 2 and counts["ann_indexes"] == 1

    with db() as session:
        assert _existing_indexes(session, names) == []
        registered = session.scalar(
            text("SELECT count(*) FROM memory_ann_indexes WHERE tenant = :t AND user_id = :u"),
            {"t": tenant, "u": victim},
        )
        assert registered == 0
        kept = set(
            session.scalars(select(DeadLetter.id).where(DeadLetter.id.in_(letters.values())))
        )
        assert kept == {letters["other tenant"], letters["other user"]}


def test_the_tombstone_is_an_hmac_under_the_servers_secret(
    api: TestClient,
    db: sessionmaker[Session],
    make_key: Callable[..., dict[str, str]],
    stack_env: dict[str, str],
    ids: dict[str, str],
) -> None:
    tenant, victim = ids["tenant"], ids["user"]
    assert api.delete(f"/v1/users/{victim}", headers=make_key(tenant, ("admin",))).is_success
    secret_file = Path(stack_env["MEMWELL_DATA_DIR"]) / SECRET_FILE
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    key = secret_file.read_text().strip().encode()
    expected = hmac.new(key, f"{tenant}\x1f{victim}".encode(), hashlib.sha256).hexdigest()
    with db() as session:
        stored = session.scalars(
            select(UserErasure.user_hash).where(UserErasure.tenant == tenant)
        ).all()
    assert list(stored) == [expected] == [user_hash(tenant, victim)]
    # Without the secret, the id cannot be confirmed from the table.
    assert hashlib.sha256(f"{tenant}\x1f{victim}".encode()).hexdigest() not in stored


def test_an_unkeyed_tombstone_of_an_earlier_erasure_still_stops_late_turns(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    tenant, user = ids["tenant"], ids["user"]
    erased_at = datetime(2026, 1, 1, tzinfo=UTC)
    with db.begin() as session:
        session.add(
            UserErasure(tenant=tenant, user_hash=legacy_user_hash(tenant, user),
                        erased_at=erased_at, receipt={})
        )  # fmt: skip
    with db() as session:
        assert erasures_of(session, tenant, [user, user + "-other"]) == {user: erased_at}
