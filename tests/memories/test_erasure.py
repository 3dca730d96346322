"""Erasure: DELETE /v1/users/{id} leaves nothing of the user in any table, Redis key
or queue, returns a receipt, and a turn of the user still queued is dropped by the
worker. Deleting one memory redacts its history but keeps the events."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

import redis
from fastapi.testclient import TestClient
from sqlalchemy import func, insert, select, text
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.buffer.session_buffer import user_key_pattern
from memwell.core.queues import Queue
from memwell.db.models import Memory, MemoryEvent, Turn, UserErasure
from memwell.db.tenancy import make_tenant_sessionmaker, tenant_transaction
from memwell.intake.dead_letters import record_dead_letter
from memwell.local.waiting import broker_idle, wait_for
from memwell.local.worker_process import WorkerProcess
from memwell.memories.erasure import REDACTED, erasure_receipts, redact_memory_history

USER_TABLES = ("turns", "memories", "memory_events", "sessions")


def _status(api: TestClient, headers: dict[str, str], turn_id: str) -> str:
    status: str = api.get(f"/v1/turns/{turn_id}", headers=headers).json()["status"]
    return status


def _rows_mentioning(session: Session, needle: str) -> dict[str, int]:
    """Rows of every table whose text form contains `needle` (any column)."""
    tables = session.scalars(
        text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    ).all()
    found = {}
    for table in tables:
        n = session.scalar(
            text(f'SELECT count(*) FROM "{table}" t WHERE t::text LIKE :pat'),
            {"pat": f"%{needle}%"},
        )
        if n:
            found[table] = n
    return found


def test_erasure_leaves_nothing_and_drops_queued_turns(
    api: TestClient,
    worker: WorkerProcess,
    db: sessionmaker[Session],
    make_key: Callable[..., dict[str, str]],
    stack_env: dict[str, str],
    ids: dict[str, str],
) -> None:
    tenant, other_tenant = ids["tenant"], ids["tenant"] + "-neighbour"
    key = make_key(tenant, ("admin",))
    victim, bystander = f"victim-{uuid.uuid4().hex[:8]}", ids["user"]
    secret = f"my passport number is {uuid.uuid4().hex[:12]}"

    said = api.post(
        "/v1/chat", json={"user_id": victim, "session_id": "s1", "message": secret}, headers=key
    ).json()
    batch = api.post(
        "/v1/turns",
        json={"turns": [
            {"user_id": victim, "session_id": "s2", "content": f"{secret}, again"},
            {"user_id": bystander, "session_id": "s9", "content": "I like cheese."},
        ]},
        headers=key,
    ).json()  # fmt: skip
    same_id_elsewhere = memwell.enqueue_turn(
        user_id=victim, session_id="s1", content="other tenant's victim", tenant=other_tenant
    )
    turn_ids = said["turn_ids"] + batch["turn_ids"]
    wait_for(lambda: all(_status(api, key, t) == "processed" for t in turn_ids), timeout=60)
    with db.begin() as session:
        record_dead_letter(
            session,
            task_name="memwell.ingest_turns",
            tenant=tenant,
            payload={"payload": {"tenant": tenant, "turns": [{"user_id": victim, "x": secret}]}},
            error="test",
        )  # fmt: skip
    client = redis.Redis.from_url(stack_env["REDIS_URL"])
    assert list(client.scan_iter(match=user_key_pattern(tenant, victim)))
    with db() as session:
        # Extraction may merge the repeated secret: count what is really there.
        memories_before = session.scalar(
            select(func.count()).where(Memory.tenant == tenant, Memory.user_id == victim)
        )
        events_before = session.scalar(
            select(func.count()).where(MemoryEvent.tenant == tenant, MemoryEvent.user_id == victim)
        )
    assert memories_before and events_before

    response = api.delete(f"/v1/users/{victim}", headers=key)
    assert response.status_code == 200, response.text
    receipt = response.json()
    print("erasure receipt:", receipt)
    counts = receipt["counts"]
    assert receipt["tenant"] == tenant and receipt["user_id"] == victim
    assert counts["turns"] == 3 and counts["memories"] == memories_before
    assert counts["sessions"] == 2
    # As many history events as the pipeline wrote (a merge may or may not add one).
    assert counts["memory_events"] == events_before and counts["dead_letters"] == 1
    assert counts["redis_keys"] >= 2
    erased_at = datetime.fromisoformat(receipt["erased_at"])

    # A turn queued before the erasure (its event time says so) reaches a worker now.
    late = memwell.enqueue_turn(
        user_id=victim, session_id="s1", content=f"{secret} (late)", tenant=tenant,
        created_at=erased_at - timedelta(seconds=1),
    )  # fmt: skip
    # Settled, not merely off the queues: the turn may be on its way to the broker while
    # the queues are still empty, and a loaded host shows it as "unknown" then.
    wait_for(
        lambda: (
            api.get(f"/v1/turns/{late}", headers=key).json()["status"] not in ("unknown", "pending")
        ),
        timeout=60,
        what="the late turn to settle",
    )
    wait_for(lambda: broker_idle(stack_env["REDIS_URL"]), timeout=60, what="queues to drain")
    # Dropped, and it says so (a client waiting on it returns), with nothing of the user.
    dropped = api.get(f"/v1/turns/{late}", headers=key).json()
    assert (dropped["status"], dropped["reason"], dropped["user_id"]) == (
        "dropped", "user erased", None,
    )  # fmt: skip

    with db() as session:
        for table in USER_TABLES:
            n = session.scalar(
                text(f"SELECT count(*) FROM {table} WHERE tenant = :t AND user_id = :u"),
                {"t": tenant, "u": victim},
            )
            assert n == 0, f"{table} still holds the user"
        assert _rows_mentioning(session, secret) == {}
        # The dropped turn's record keeps neither its id nor its user's.
        assert _rows_mentioning(session, late) == {}
        assert "dropped_turns" not in _rows_mentioning(session, victim)
        tombstone = session.scalars(select(UserErasure).where(UserErasure.tenant == tenant)).one()
        assert victim not in str(tombstone.receipt) and victim not in tombstone.user_hash
        # Neighbours are untouched: the bystander, and the same user id in another tenant.
        kept = select(func.count()).where(Turn.tenant == tenant, Turn.user_id == bystander)
        assert session.scalar(kept) == 1
        assert session.get(Turn, (other_tenant, same_id_elsewhere)) is not None
    assert list(client.scan_iter(match=user_key_pattern(tenant, victim))) == []
    queued = [client.lrange(q.value, 0, -1) for q in Queue] + [client.hvals("unacked")]
    assert not any(victim.encode() in m for batch_ in queued for m in batch_)

    # Erasing again is harmless and finds nothing.
    again = api.delete(f"/v1/users/{victim}", headers=key).json()
    assert all(v == 0 for v in again["counts"].values())
    # The user may come back: a new turn after the erasure is kept.
    back = api.post(
        "/v1/turns", json={"turns": [{"user_id": victim, "session_id": "s3", "content": "hi"}]},
        headers=key,
    ).json()["turn_ids"][0]  # fmt: skip
    wait_for(lambda: _status(api, key, back) == "processed", timeout=60)


def test_redacting_a_memory_keeps_its_events_without_text(
    database_url: str, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    tenant = ids["tenant"]
    target, other = uuid.uuid4(), uuid.uuid4()
    with db.begin() as session:
        for mid, content in ((target, "I am pregnant"), (other, "I like tea")):
            session.add(
                Memory(id=mid, tenant=tenant, user_id="u", kind="fact", content=content,
                       content_hash=mid.hex)
            )  # fmt: skip
        session.flush()
        session.execute(
            insert(MemoryEvent),
            [
                {"tenant": tenant, "user_id": "u", "memory_id": target, "event": "add",
                 "new_content": "I am pregnant"},
                {"tenant": tenant, "user_id": "u", "memory_id": target, "event": "update",
                 "old_content": "I am pregnant", "new_content": "I am pregnant (due May)"},
                {"tenant": tenant, "user_id": "u", "memory_id": other, "event": "add",
                 "new_content": "I like tea"},
            ],
        )  # fmt: skip
    from sqlalchemy import create_engine, pool

    maker = make_tenant_sessionmaker(create_engine(database_url, poolclass=pool.NullPool))
    with tenant_transaction(maker, tenant) as session:
        assert redact_memory_history(session, tenant=tenant, memory_id=target) == 2
    with db() as session:
        events = session.scalars(
            select(MemoryEvent).where(MemoryEvent.tenant == tenant).order_by(MemoryEvent.id)
        ).all()
    mine = [e for e in events if e.memory_id == target]
    assert [e.event for e in mine] == ["add", "update", "redact"]
    assert all("pregnant" not in (e.old_content or "") + (e.new_content or "") for e in mine)
    assert mine[1].old_content == REDACTED and mine[0].old_content is None
    assert next(e for e in events if e.memory_id == other).new_content == "I like tea"


def test_ingest_holds_a_lock_that_an_erasure_must_wait_for(db: sessionmaker[Session]) -> None:
    from memwell.memories.erasure import lock_users, user_hash

    probe = text("SELECT pg_try_advisory_xact_lock(hashtextextended(:k, 0))")
    with db.begin() as ingest:
        lock_users(ingest, "t", ["alice", "bob"], shared=True)
        with db.begin() as erasure:
            assert erasure.scalar(probe, {"k": user_hash("t", "bob")}) is False
            assert erasure.scalar(probe, {"k": user_hash("t", "carol")}) is True


def test_each_erasure_keeps_its_receipt_and_unparsed_letters_are_erased(
    api: TestClient,
    db: sessionmaker[Session],
    make_key: Callable[..., dict[str, str]],
    ids: dict[str, str],
) -> None:
    tenant, victim = ids["tenant"], f"victim-{uuid.uuid4().hex[:8]}"
    key = make_key(tenant, ("admin",))
    body = {"user_id": victim, "memories": [{"content": "Likes figs."}]}
    added = api.post("/v1/memories", headers=key, json=body)
    assert added.status_code == 200, added.text
    raw = f'{{"payload": {{"tenant": "{tenant}", "turns": [{{"user_id": "{victim}" \xff'
    with db.begin() as session:
        # A poison payload that names the user under a misspelt field, and a message no
        # worker could decode (no tenant could be read from it).
        record_dead_letter(
            session, task_name="memwell.ingest_turns", tenant=tenant, error="test",
            payload={"payload": {"tenant": tenant, "turns": [{"usr_id": victim, "x": "fig"}]}},
        )  # fmt: skip
        record_dead_letter(
            session, task_name="memwell.ingest_turns", error="undecodable body",
            payload={"unreadable_body_b64": base64.b64encode(raw.encode("latin-1")).decode()},
        )  # fmt: skip

    first = api.delete(f"/v1/users/{victim}", headers=key).json()["counts"]
    assert first["memories"] == 1
    assert first["dead_letters"] == 1 and first["dead_letters_without_tenant"] == 1
    second = api.delete(f"/v1/users/{victim}", headers=key).json()["counts"]
    assert second["memories"] == 0 and second["dead_letters"] == 0

    with db() as session:
        receipts = erasure_receipts(session, tenant=tenant, user_id=victim)
    assert [r.counts["memories"] for r in receipts] == [1, 0]
    assert receipts[0].erased_at < receipts[1].erased_at
    with db() as session:
        assert _rows_mentioning(session, victim) == {}
