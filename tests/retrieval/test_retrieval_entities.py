"""The entity term of the retrieval statement on real Postgres: memories linked to the
entities a query names (or to their neighbours) are found and scored as `entity_match`,
by rarity, within the tenant and user only."""

from __future__ import annotations

import math
import uuid
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, create_engine, delete, insert, pool, text
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import Entity, EntityAlias, EntityRelation, Memory, MemoryEntity
from memwell.retrieval.ann import maintain_ann_indexes
from memwell.retrieval.search import MemoryHit, SearchParams, search_sync
from tests.support.memory_factory import DIMS, NOW, QUERY, add_memory, search_params, unit

QUESTION = "What does Zed do on weekends?"
HOP = 0.5


def _entity(s: Session, t: str, u: str, key: str, memories: list[uuid.UUID]) -> uuid.UUID:
    """An entity of user `u` (alias = its key) mentioned by exactly `memories`."""
    entity_id: uuid.UUID = s.execute(
        insert(Entity)
        .values(tenant=t, user_id=u, key=key, name=key.title(), mention_count=len(memories))
        .returning(Entity.id)
    ).scalar_one()
    s.execute(insert(EntityAlias).values(tenant=t, user_id=u, alias=key, entity_id=entity_id))
    if memories:
        s.execute(
            insert(MemoryEntity),
            [{"memory_id": m, "entity_id": entity_id, "tenant": t, "user_id": u} for m in memories],
        )
    return entity_id


def _fillers(s: Session, t: str, u: str, n: int = 12) -> list[uuid.UUID]:
    """Memories close to the query, with no word of the question."""
    return [
        add_memory(
            s, tenant=t, user_id=u, content=f"filler note {i}", embedding=unit(0.6, 2 + i % 6)
        )
        for i in range(n)
    ]


def _far(s: Session, t: str, u: str, content: str) -> uuid.UUID:
    """A memory the query cannot find by itself: under the floor, no shared word."""
    return add_memory(s, tenant=t, user_id=u, content=content, embedding=unit(-0.5))


def _params(ids: dict[str, str], keys: tuple[str, ...], **fields: Any) -> SearchParams:
    base: dict[str, Any] = {
        "tenant": ids["tenant"], "user_id": ids["user"], "query_text": QUESTION,
        "fusion": "vector", "similarity_floor": 0.2, "k": 20, "w_relevance": 1.0,
        "w_importance": 0.2, "w_recency": 0.0, "entity_keys": keys, "entity_weight": 0.3,
        "entity_hop": HOP, "entity_candidates": 50,
    }  # fmt: skip
    base.update(fields)
    return search_params(**base)


def _search(db: sessionmaker[Session], params: SearchParams) -> dict[str, MemoryHit]:
    with db() as session:
        return {h.content: h for h in search_sync(session, params)}


def _idf(df: int, n: int) -> float:
    raw = math.log((n - df + 0.5) / (df + 0.5)) / math.log(max((n - 0.5) / 1.5, 2.0))
    return min(1.0, max(0.0, raw))


def test_a_linked_memory_is_found_without_overlap_and_explained(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    t, u = ids["tenant"], ids["user"]
    with db.begin() as s:
        fillers = _fillers(s, t, u)
        kayak = _far(s, t, u, "Bought a red kayak for the lake.")
        _entity(s, t, u, "zed", [kayak])
        _entity(s, t, u, "filler", fillers[:3])

    without = _search(db, _params(ids, ()))
    assert "Bought a red kayak for the lake." not in without
    assert all(h.entity_match == 0.0 for h in without.values())

    hits = _search(db, _params(ids, ("zed",)))
    kayak_hit = hits["Bought a red kayak for the lake."]
    assert kayak_hit.entity_match == pytest.approx(1.0)  # named in one memory: the rarest
    assert kayak_hit.similarity == pytest.approx(-0.5, abs=1e-5)
    # relevance = (fusion "vector": similarity) + w_entity * entity_match
    assert kayak_hit.relevance == pytest.approx(-0.5 + 0.3 * 1.0, abs=1e-5)
    assert kayak_hit.score == pytest.approx(1.0 * kayak_hit.relevance + 0.2 * 0.5, abs=1e-5)
    for content, hit in hits.items():
        if content != kayak_hit.content:
            assert hit.entity_match == 0.0
            assert hit.score == pytest.approx(without[content].score, abs=1e-6)
    # Weight 0 is the statement without the term: not found.
    assert kayak_hit.content not in _search(db, _params(ids, ("zed",), entity_weight=0.0))


@pytest.mark.parametrize("as_of", [None, NOW], ids=["now", "as_of"])
def test_a_neighbour_counts_less_than_a_direct_match(
    db: sessionmaker[Session], ids: dict[str, str], as_of: datetime | None
) -> None:
    t, u = ids["tenant"], ids["user"]
    with db.begin() as s:
        _fillers(s, t, u)
        direct = _far(s, t, u, "Zed's weekend plans are still open.")
        club_memory = _far(s, t, u, "The harbour paddling club meets at dawn.")
        old_memory = _far(s, t, u, "The chess circle met on Tuesdays.")
        zed = _entity(s, t, u, "zed", [direct])
        club = _entity(s, t, u, "paddling club", [club_memory])
        chess = _entity(s, t, u, "chess circle", [old_memory])
        s.execute(
            insert(EntityRelation),
            [
                {"tenant": t, "user_id": u, "subject_id": zed, "relation": "member_of",
                 "object_id": club},
                # An edge that no longer holds says nothing about Zed now.
                {"tenant": t, "user_id": u, "subject_id": zed, "relation": "member_of",
                 "object_id": chess, "valid_to": NOW.replace(year=NOW.year - 1)},
            ],
        )  # fmt: skip
    hits = _search(db, _params(ids, ("zed",), as_of=as_of))
    assert hits["Zed's weekend plans are still open."].entity_match == pytest.approx(1.0)
    neighbour = hits["The harbour paddling club meets at dawn."]
    assert neighbour.entity_match == pytest.approx(HOP * 1.0 * 1.0)
    assert "The chess circle met on Tuesdays." not in hits


def test_an_entity_in_most_memories_contributes_nothing(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    """The user's own name (or a conversation's speakers) is linked to nearly every
    memory: it neither scores, nor lets its memories pass the floor, nor ranks a memory
    by the text match of that name."""
    t, u = ids["tenant"], ids["user"]
    with db.begin() as s:
        fillers = _fillers(s, t, u)
        thanks = _far(s, t, u, "Thanks, Zed!")
        _entity(s, t, u, "zed", [*fillers, thanks])
    question = "What did Zed cook?"
    off = _search(db, _params(ids, (), query_text=question, fusion="score", text_weight=0.5))
    on = _search(db, _params(ids, ("zed",), query_text=question, fusion="score", text_weight=0.5))
    assert off["Thanks, Zed!"].text_rank == pytest.approx(1.0)  # the name alone matched
    assert "Thanks, Zed!" not in on  # under the floor, and the name no longer matches
    assert all(h.entity_match == 0.0 for h in on.values())
    for content, hit in on.items():
        assert hit.score == pytest.approx(off[content].score, abs=1e-6)


def test_rarity_scales_the_match(db: sessionmaker[Session], ids: dict[str, str]) -> None:
    t, u = ids["tenant"], ids["user"]
    with db.begin() as s:
        fillers = _fillers(s, t, u, n=20)
        _entity(s, t, u, "zed", fillers[:4])
    hits = _search(db, _params(ids, ("zed",)))
    linked = [h for h in hits.values() if h.entity_match > 0]
    assert len(linked) == 4
    assert linked[0].entity_match == pytest.approx(_idf(4, 20), abs=1e-6)
    assert 0.0 < linked[0].entity_match < 1.0


def test_the_entity_lookup_stays_in_its_tenant(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    t, u = ids["tenant"], ids["user"]
    other = f"{t}-other"
    with db.begin() as s:
        _fillers(s, t, u)
        # The same user id and entity name in another tenant, linked to its own memory.
        _fillers(s, other, u)
        theirs = _far(s, other, u, "Zed's secret from the other tenant.")
        _entity(s, other, u, "zed", [theirs])
    hits = _search(db, _params(ids, ("zed",)))
    assert "Zed's secret from the other tenant." not in hits
    assert all(h.entity_match == 0.0 for h in hits.values())

    # As the service's role, row-level security hides another tenant's rows even if a
    # request named it: neither its entities nor its memories come back.
    enter = text(
        "SELECT set_config('role', 'memwell_app', true), set_config('memwell.tenant', :s, true)"
    )
    stolen = _params({"tenant": other, "user": u}, ("zed",))
    with db.begin() as s:
        s.execute(enter, {"s": t})
        assert search_sync(s, stolen) == []
    with db.begin() as s:
        s.execute(enter, {"s": other})
        found = {h.content: h for h in search_sync(s, stolen)}
    assert found["Zed's secret from the other tenant."].entity_match == pytest.approx(1.0)


def test_the_ann_path_takes_linked_memories_as_candidates(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    t, u = ids["tenant"], ids["user"]
    rows = 240
    rng = np.random.default_rng(5)
    with db.begin() as s:
        for i, v in enumerate(rng.standard_normal((rows - 1, DIMS)).astype(np.float32)):
            add_memory(s, tenant=t, user_id=u, content=f"row {i}", embedding=v)
        # The farthest row there is, with no word of the question.
        kayak = add_memory(s, tenant=t, user_id=u, content="A red kayak.", embedding=-QUERY)
        _entity(s, t, u, "zed", [kayak])
    engine: Engine = create_engine(db.kw["bind"].url, poolclass=pool.NullPool)
    try:
        maintain_ann_indexes(engine, threshold=rows)
        params = _params(ids, ("zed",), ann_dims=DIMS, ann_k=10, similarity_floor=0.8, k=50)
        with db() as s:
            ann = {h.content: h for h in search_sync(s, params)}
            exact = {h.content: h for h in search_sync(s, replace(params, ann_dims=None))}
        assert ann["A red kayak."].entity_match == pytest.approx(1.0)
        assert exact["A red kayak."].entity_match == pytest.approx(1.0)
        off = replace(params, entity_keys=(), entity_weight=0.0)
        with db() as s:
            assert "A red kayak." not in {h.content for h in search_sync(s, off)}
    finally:
        with db.begin() as s:
            s.execute(delete(Memory).where(Memory.tenant == t, Memory.user_id == u))
        maintain_ann_indexes(engine, threshold=rows)  # drops this user's indexes
        engine.dispose()


def test_a_query_of_odd_characters_still_parses_without_a_common_name(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    t, u = ids["tenant"], ids["user"]
    with db.begin() as s:
        fillers = _fillers(s, t, u)
        path = add_memory(
            s, tenant=t, user_id=u, content="Zed keeps the logs under C:\\temp\\o'hara",
            embedding=unit(-0.5),
        )  # fmt: skip
        _entity(s, t, u, "zed", [*fillers, path])
    question = "Where does Zed keep C:\\temp\\o'hara's logs? 'quoted' \\ back"
    hits = _search(db, _params(ids, ("zed",), query_text=question, fusion="score"))
    assert hits["Zed keeps the logs under C:\\temp\\o'hara"].text_rank > 0
