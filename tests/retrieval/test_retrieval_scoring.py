"""The one retrieval statement on real Postgres: score parts, ordering, hybrid text."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from memwell.retrieval.search import MemoryHit, SearchParams, search_sync
from tests.support.memory_factory import MODEL, NOW, QUERY, add_memory, search_params, unit


def _params(ids: dict[str, str], **overrides: Any) -> SearchParams:
    base: dict[str, Any] = {
        "tenant": ids["tenant"], "user_id": ids["user"], "query_vector": QUERY,
        "embedding_model": MODEL, "k": 10, "similarity_floor": 0.0, "fusion": "vector",
        "w_relevance": 1.0, "w_importance": 0.2, "w_recency": 0.3,
        "half_life_h": 24.0, "half_life_access_h": 12.0, "now": NOW,
    }  # fmt: skip
    base.update(overrides)
    return search_params(**base)


def _search(db: sessionmaker[Session], params: SearchParams) -> list[MemoryHit]:
    with db() as session:
        return search_sync(session, params)


def test_score_parts_and_order_follow_the_formula(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    # (content, cosine, importance, age in hours)
    spec = [
        ("close, fresh", 0.90, 0.5, 0),
        ("close, two days old", 0.90, 0.5, 48),
        ("further, fresh", 0.80, 0.5, 0),
        ("further, important", 0.80, 0.9, 0),
        ("far, fresh, important", 0.40, 1.0, 0),
    ]
    with db.begin() as session:
        for content, cos, imp, age in spec:
            add_memory(
                session, tenant=ids["tenant"], user_id=ids["user"], content=content,
                embedding=unit(cos), importance=imp, created_at=NOW - timedelta(hours=age),
            )  # fmt: skip
    hits = _search(db, _params(ids))

    expected = {
        content: 1.0 * cos + 0.2 * imp + 0.3 * math.pow(2, -age / 24.0)
        for content, cos, imp, age in spec
    }
    assert [h.content for h in hits] == sorted(expected, key=lambda c: -expected[c])
    for hit in hits:
        _, cos, imp, age = next(s for s in spec if s[0] == hit.content)
        assert hit.similarity == pytest.approx(cos, abs=1e-5)
        assert hit.relevance == pytest.approx(cos, abs=1e-5)  # fusion "vector"
        assert hit.importance == pytest.approx(imp)
        assert hit.recency == pytest.approx(math.pow(2, -age / 24.0), abs=1e-6)
        assert hit.score == pytest.approx(expected[hit.content], abs=1e-5)
        assert hit.source_turn_ids and hit.text_rank == 0.0


def test_a_recent_access_refreshes_recency(db: sessionmaker[Session], ids: dict[str, str]) -> None:
    old = NOW - timedelta(days=30)
    with db.begin() as session:
        add_memory(
            session, tenant=ids["tenant"], user_id=ids["user"], content="used yesterday",
            embedding=unit(0.8), created_at=old, last_accessed_at=NOW - timedelta(hours=12),
        )  # fmt: skip
        add_memory(
            session, tenant=ids["tenant"], user_id=ids["user"], content="never used",
            embedding=unit(0.8, axis=2), created_at=old,
        )  # fmt: skip
    hits = {h.content: h for h in _search(db, _params(ids))}
    assert hits["used yesterday"].recency == pytest.approx(0.5, abs=1e-6)  # 12 h / 12 h
    assert hits["never used"].recency == pytest.approx(math.pow(2, -30), abs=1e-9)
    assert hits["used yesterday"].score > hits["never used"].score


def test_floor_and_top_k(db: sessionmaker[Session], ids: dict[str, str]) -> None:
    with db.begin() as session:
        for i, cos in enumerate([0.95, 0.9, 0.85, 0.3, 0.1]):
            add_memory(
                session, tenant=ids["tenant"], user_id=ids["user"], content=f"m{i}",
                embedding=unit(cos),
            )  # fmt: skip
    assert [h.content for h in _search(db, _params(ids, similarity_floor=0.5))] == [
        "m0", "m1", "m2",
    ]  # fmt: skip
    assert len(_search(db, _params(ids, k=2))) == 2


@pytest.mark.parametrize("fusion", ["rrf", "score"])
def test_hybrid_beats_pure_vector_on_an_exact_keyword(
    db: sessionmaker[Session], ids: dict[str, str], fusion: str
) -> None:
    with db.begin() as session:
        add_memory(
            session, tenant=ids["tenant"], user_id=ids["user"],
            content="We booked the ferry to Zanzibar for the anniversary.", embedding=unit(0.55),
        )  # fmt: skip
        for i, cos in enumerate([0.7, 0.65, 0.6]):
            add_memory(
                session, tenant=ids["tenant"], user_id=ids["user"],
                content=f"Talked about travel plans and beaches, note {i}.",
                embedding=unit(cos, axis=2 + i),
            )  # fmt: skip
    query = "When is the Zanzibar trip?"
    vector_only = _search(db, _params(ids, query_text=query, fusion="vector"))
    hybrid = _search(db, _params(ids, query_text=query, fusion=fusion, text_weight=0.3))
    assert "Zanzibar" not in vector_only[0].content
    assert "Zanzibar" in hybrid[0].content
    assert hybrid[0].text_rank == pytest.approx(1.0)
    assert all(h.text_rank == 0.0 for h in hybrid[1:])


def test_a_keyword_match_passes_the_similarity_floor(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    with db.begin() as session:
        add_memory(
            session, tenant=ids["tenant"], user_id=ids["user"],
            content="My passport number ends in QX7731.", embedding=unit(0.05),
        )  # fmt: skip
    params = _params(ids, similarity_floor=0.3, fusion="score", text_weight=0.3)
    assert _search(db, params) == []
    hits = _search(db, _params(ids, similarity_floor=0.3, fusion="score", query_text="QX7731"))
    assert [h.content for h in hits] == ["My passport number ends in QX7731."]


def test_a_rare_word_outranks_a_common_one_in_the_text_rank(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    # "really" is in five of the six memories, "saxophone" in one: BM25 weighs each
    # word matched by its rarity (ts_rank, counting repeats, put the chatter first).
    with db.begin() as session:
        for i in range(5):
            add_memory(
                session, tenant=ids["tenant"], user_id=ids["user"],
                content=f"Really, really, really glad to hear it, number {i}!",
                embedding=unit(0.5, axis=1 + i),
            )  # fmt: skip
        add_memory(
            session, tenant=ids["tenant"], user_id=ids["user"],
            content="She plays the saxophone in a jazz band.", embedding=unit(0.5, axis=7),
        )  # fmt: skip
    hits = _search(db, _params(ids, query_text="Does she really play saxophone?", fusion="score"))
    by_content = {h.content: h.text_rank for h in hits}
    assert by_content["She plays the saxophone in a jazz band."] == pytest.approx(1.0)
    chatter = [rank for content, rank in by_content.items() if content.startswith("Really")]
    # idf of "really": ln(1 + 1.5/5.5) = 0.24; of "saxophone": ln(1 + 5.5/1.5) = 1.54
    assert len(chatter) == 5 and all(0 < rank < 0.25 for rank in chatter)
    assert hits[0].content == "She plays the saxophone in a jazz band."
