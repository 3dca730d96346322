"""What a search may see: tombstones, supersession, as_of, filters, and isolation."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import Memory
from memwell.retrieval.search import MemoryHit, SearchFilters, search_sync
from tests.support.memory_factory import DIMS, MODEL, NOW, QUERY, add_memory, search_params, unit


def _search(db: sessionmaker[Session], ids: dict[str, str], **kw: Any) -> list[MemoryHit]:
    params: dict[str, Any] = {
        "tenant": ids["tenant"], "user_id": ids["user"], "query_vector": QUERY,
        "embedding_model": MODEL, "k": 50, "similarity_floor": -1.0, "now": NOW,
    }  # fmt: skip
    params.update(kw)
    with db() as session:
        return search_sync(session, search_params(**params))


def _contents(hits: list[MemoryHit]) -> set[str]:
    return {h.content for h in hits}


def test_tombstoned_and_superseded_never_come_back(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    t, u = ids["tenant"], ids["user"]
    with db.begin() as s:
        old = add_memory(s, tenant=t, user_id=u, content="lives in Oslo", embedding=unit(0.9))
        new = add_memory(s, tenant=t, user_id=u, content="lives in Bergen", embedding=unit(0.8))
        gone = add_memory(s, tenant=t, user_id=u, content="deleted note", embedding=unit(0.95))
        s.execute(update(Memory).where(Memory.id == old).values(superseded_by=new))
        s.execute(update(Memory).where(Memory.id == gone).values(deleted_at=NOW))
    assert _contents(_search(db, ids)) == {"lives in Bergen"}


def test_as_of_answers_as_the_store_stood(db: sessionmaker[Session], ids: dict[str, str]) -> None:
    t, u = ids["tenant"], ids["user"]
    t1, t2, t3 = NOW - timedelta(days=30), NOW - timedelta(days=20), NOW - timedelta(days=10)
    with db.begin() as s:
        old = add_memory(
            s, tenant=t, user_id=u, content="works at Acme", embedding=unit(0.9), created_at=t1
        )
        new = add_memory(
            s, tenant=t, user_id=u, content="works at Globex", embedding=unit(0.9, axis=2),
            created_at=t2, valid_from=t2,
        )  # fmt: skip
        s.execute(update(Memory).where(Memory.id == old).values(superseded_by=new))
        gone = add_memory(
            s, tenant=t, user_id=u, content="has a cat", embedding=unit(0.5), created_at=t1
        )
        s.execute(update(Memory).where(Memory.id == gone).values(deleted_at=t3))
        add_memory(
            s, tenant=t, user_id=u, content="had a visa", embedding=unit(0.5, axis=3),
            created_at=t1, valid_from=t1, valid_to=t2,
        )  # fmt: skip

    def at(when: Any) -> set[str]:
        return _contents(_search(db, ids, as_of=when, now=when))

    assert at(t1 - timedelta(seconds=1)) == set()
    assert at(t1 + timedelta(days=1)) == {"works at Acme", "has a cat", "had a visa"}
    assert at(t2 + timedelta(days=1)) == {"works at Globex", "has a cat"}
    assert at(t3 + timedelta(days=1)) == {"works at Globex"}
    assert _contents(_search(db, ids)) == {"works at Globex"}


def test_filters(db: sessionmaker[Session], ids: dict[str, str]) -> None:
    t, u = ids["tenant"], ids["user"]
    with db.begin() as s:
        pref = add_memory(
            s, tenant=t, user_id=u, content="likes tea", embedding=unit(0.9), kind="preference",
            metadata_={"topic": "food", "lang": "en"}, agent_id="a1", session_id="s1",
            created_at=NOW - timedelta(days=5),
        )  # fmt: skip
        add_memory(
            s, tenant=t, user_id=u, content="met Ana", embedding=unit(0.8, axis=2), kind="event",
            metadata_={"topic": "people"}, agent_id="a2", session_id="s2",
            created_at=NOW - timedelta(days=1),
        )  # fmt: skip

    def found(**filters: Any) -> set[str]:
        return _contents(_search(db, ids, filters=SearchFilters(**filters)))

    assert found() == {"likes tea", "met Ana"}
    assert found(kinds=("preference",)) == {"likes tea"}
    assert found(kinds=("preference", "event")) == {"likes tea", "met Ana"}
    assert found(metadata={"topic": "food"}) == {"likes tea"}
    assert found(metadata={"topic": "food", "lang": "fr"}) == set()
    assert found(created_after=NOW - timedelta(days=2)) == {"met Ana"}
    assert found(created_before=NOW - timedelta(days=2)) == {"likes tea"}
    assert found(agent_id="a2") == {"met Ana"}
    assert found(session_id="s1") == {"likes tea"}
    assert found(exclude_ids=(pref,)) == {"met Ana"}


def test_other_embedding_models_are_not_compared(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    with db.begin() as s:
        add_memory(
            s, tenant=ids["tenant"], user_id=ids["user"], content="old model row",
            embedding=unit(0.9), model="other-model",
        )  # fmt: skip
    assert _search(db, ids) == []


# Isolation as a property: random owners and memories in two tenants; whoever asks,
# nothing of anyone else ever comes back, whatever the query.
_owner = st.tuples(st.sampled_from(["A", "B"]), st.sampled_from(["u1", "u2", "u3"]))
_memory = st.tuples(
    _owner,
    st.lists(st.floats(-1, 1, allow_nan=False), min_size=DIMS, max_size=DIMS),
    st.sampled_from(["shared secret words", "the same text for all", "unique"]),
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    memories=st.lists(_memory, min_size=1, max_size=12),
    asker=_owner,
    query=st.lists(st.floats(-1, 1, allow_nan=False), min_size=DIMS, max_size=DIMS),
    fusion=st.sampled_from(["rrf", "score", "vector"]),
)
def test_no_search_returns_another_users_memory(
    db: sessionmaker[Session],
    memories: list[Any],
    asker: tuple[str, str],
    query: list[float],
    fusion: str,
) -> None:
    import numpy as np

    run = uuid.uuid4().hex[:8]
    owners: dict[uuid.UUID, tuple[str, str]] = {}
    with db.begin() as s:
        for i, ((tenant, user), vec, text) in enumerate(memories):
            emb = np.array(vec, dtype=np.float32) + np.float32(1e-3)  # never the zero vector
            mid = add_memory(
                s, tenant=f"{tenant}-{run}", user_id=user, content=f"{text} {i}", embedding=emb
            )
            owners[mid] = (f"{tenant}-{run}", user)
    tenant, user = f"{asker[0]}-{run}", asker[1]
    hits = _search(
        db, {"tenant": tenant, "user": user},
        query_vector=np.array(query, dtype=np.float32) + np.float32(1e-3),
        query_text="shared secret words text", fusion=fusion,
    )  # fmt: skip
    assert all(owners[h.id] == (tenant, user) for h in hits)
    assert {h.id for h in hits} == {m for m, o in owners.items() if o == (tenant, user)}
