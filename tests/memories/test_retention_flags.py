"""A client pins a memory or sets its expiry through the API; prune then honours it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import get_settings
from memwell.db.models import Memory, MemoryEvent
from memwell.memories.edit import MemoryPatch
from tests.support.maintenance_factories import add_memory


def test_pin_and_expiry_are_set_recorded_and_validated(
    api: TestClient, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    tenant = get_settings().default_tenant
    memory_id = add_memory(db, tenant=tenant, user_id=ids["user"], at=datetime.now(UTC))
    when = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0)

    pinned = api.patch(f"/v1/memories/{memory_id}", json={"pinned": True})
    assert pinned.status_code == 200, pinned.text
    assert pinned.json()["pinned"] is True and pinned.json()["expires_at"] is None

    dated = api.patch(f"/v1/memories/{memory_id}", json={"expires_at": when.isoformat()})
    assert dated.json()["pinned"] is True  # untouched field stays
    assert datetime.fromisoformat(dated.json()["expires_at"]) == when

    cleared = api.patch(f"/v1/memories/{memory_id}", json={"expires_at": None, "pinned": False})
    assert cleared.json()["id"] == str(memory_id)
    assert (cleared.json()["pinned"], cleared.json()["expires_at"]) == (False, None)
    with db() as s:
        row = s.get(Memory, memory_id)
        reasons = s.scalars(
            select(MemoryEvent.reason)
            .where(MemoryEvent.memory_id == memory_id)
            .order_by(MemoryEvent.id)
        ).all()
    assert row is not None and not row.pinned and row.expires_at is None
    assert reasons[0] == "retention: pinned=true" and len(reasons) == 3

    assert api.patch(f"/v1/memories/{memory_id}", json={}).status_code == 422
    assert api.patch(f"/v1/memories/{memory_id}", json={"pinned": "maybe"}).status_code == 422
    missing = api.patch(f"/v1/memories/{uuid.uuid4()}", json={"pinned": True})
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("application/problem+json")


def test_get_reads_back_every_field_patch_sets(
    api: TestClient, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    tenant = get_settings().default_tenant
    memory_id = add_memory(db, tenant=tenant, user_id=ids["user"], at=datetime.now(UTC))
    when = (datetime.now(UTC) + timedelta(days=9)).replace(microsecond=0)
    sent = {
        "pinned": True,
        "expires_at": when.isoformat(),
        "content": f"The user's locker code is {ids['user'][-4:]}.",
        "kind": "preference",
        "importance": 0.77,
        "metadata": {"origin": "support-ticket"},
    }
    assert set(sent) == set(MemoryPatch.model_fields)  # every settable field is sent
    patched = api.patch(f"/v1/memories/{memory_id}", json=sent)
    assert patched.status_code == 200, patched.text

    got = api.get(f"/v1/memories/{memory_id}").json()
    assert datetime.fromisoformat(got["expires_at"]) == when
    del sent["expires_at"]
    assert {k: got[k] for k in sent} == sent
