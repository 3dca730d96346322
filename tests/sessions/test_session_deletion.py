"""Deleting a session with its memories, where they touch other sessions' memories: what
they superseded is current again (unless a live twin already says the same), and
history elsewhere that quotes them is redacted."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy import insert, select
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import Memory, MemoryEvent
from memwell.memories.erasure import REDACTED
from tests.support.memory_factory import add_memory, unit


def test_what_the_deleted_session_superseded_is_current_again(
    api: TestClient,
    db: sessionmaker[Session],
    make_key: Callable[..., dict[str, str]],
    ids: dict[str, str],
) -> None:
    tenant, user = ids["tenant"], ids["user"]
    mine = {"tenant": tenant, "user_id": user, "embedding": unit(0.5)}
    with db.begin() as s:
        lisbon = add_memory(s, **mine, content="The user lives in Lisbon.", session_id="late")
        paris = add_memory(
            s, **mine, content="The user lives in Paris.", session_id="early", superseded_by=lisbon
        )
        tea = add_memory(s, **mine, content="The user drinks green tea.", session_id="late")
        # Superseded by the late session, but said again (live) in a third session.
        coffee = add_memory(
            s, **mine, content="The user drinks coffee.", session_id="early", superseded_by=tea
        )
        twin = add_memory(s, **mine, content="The user drinks coffee.", session_id="third")
        s.execute(
            insert(MemoryEvent).values(
                tenant=tenant, user_id=user, memory_id=paris, event="supersede",
                old_content="The user lives in Paris.", new_content="The user lives in Lisbon.",
                related_memory_id=lisbon,
            )
        )  # fmt: skip

    response = api.delete(
        "/v1/sessions/late",
        params={"user_id": user, "with_memories": "true"},
        headers=make_key(tenant, ("admin",)),
    )
    assert response.status_code == 200, response.text
    assert response.json()["counts"]["memories"] == 2

    with db() as s:
        left = {
            m.id: m.superseded_by
            for m in s.scalars(select(Memory).where(Memory.tenant == tenant)).all()
        }
        event = s.scalars(select(MemoryEvent).where(MemoryEvent.memory_id == paris)).one()
    assert left == {paris: None, coffee: twin, twin: None}
    assert (event.old_content, event.new_content) == (REDACTED, REDACTED)
    assert event.related_memory_id == lisbon  # the event keeps its shape
