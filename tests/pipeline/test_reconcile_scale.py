"""Reconcile for a user large enough to have an ANN index of their own
(memwell/retrieval/ann.py): the neighbours come through that index, bounded, and the
decisions are the ones the exact search makes; the rows written since the index was
built wait outside it, in the exact tail, and are still found until they are folded
in."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import Settings
from memwell.db.models import Memory
from memwell.embeddings import Embedder, build_embedder
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.reconcile import ReconcilePolicy, fetch_neighbours, reconcile_batch
from memwell.retrieval.ann import build_user_index, fold_ann_tails, index_name
from memwell.retrieval.search import params_from_settings, search_sync

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
FILLER = 1200  # above the test stack's MEMWELL_ANN_THRESHOLD (1,000)
FACTS = [
    "Ada lives in Berlin.",
    "Ada enjoys hiking in the Alps.",
    "Ada works as a nurse.",
    "Ada's favourite film is Alien.",
]


@pytest.fixture(scope="module")
def embedder(stack_env: dict[str, str]) -> Embedder:
    return build_embedder(Settings(embedding_provider="local"))


def _candidate(ids: dict[str, str], content: str, n: int) -> Candidate:
    return Candidate(
        tenant=ids["tenant"],
        user_id=ids["user"],
        session_id=ids["session"],
        kind="fact",
        content=content,
        importance=0.6,
        event_time=T0 + timedelta(minutes=n),
        source_turn_ids=[f"t{n}"],
    )


def _reconcile(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str], texts: list[str]
) -> dict[str, int]:
    cands = [_candidate(ids, t, i) for i, t in enumerate(texts)]
    with db.begin() as session:
        report = reconcile_batch(
            session,
            cands,
            embedder.embed(texts),
            embedding_model=embedder.model_name,
            policy=ReconcilePolicy(),
        )
    return {
        "added": report.added,
        "reinforced": report.reinforced,
        "merged": report.merged,
        "superseded": report.superseded,
    }


def _large_user(db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]) -> None:
    """FILLER unrelated memories (random directions) and the FACTS, stored."""
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((FILLER, embedder.dimensions)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = [
        {"tenant": ids["tenant"], "user_id": ids["user"], "kind": "fact",
         "content": f"filler memory {i}", "content_hash": f"filler-{i}",
         "embedding": v, "embedding_model": embedder.model_name}
        for i, v in enumerate(vectors)
    ]  # fmt: skip
    with db.begin() as session:
        session.execute(insert(Memory), rows)
    assert _reconcile(db, embedder, ids, FACTS)["added"] == len(FACTS)


def _build_index(db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]) -> None:
    engine = db.kw["bind"]
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        build_user_index(
            conn,
            tenant=ids["tenant"],
            user_id=ids["user"],
            model=embedder.model_name,
            dims=embedder.dimensions,
            rows=FILLER + len(FACTS),
        )


def _nearest(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str], texts: list[str]
) -> list[list[str]]:
    cands = [_candidate(ids, t, i) for i, t in enumerate(texts)]
    with db() as session:
        found = fetch_neighbours(
            session, cands, embedder.embed(texts), embedding_model=embedder.model_name, k=3
        )
    return [[n.content for n in sorted(f, key=lambda n: -n.similarity)] for f in found]


def test_the_ann_search_finds_the_neighbours_the_exact_search_finds(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    _large_user(db, embedder, ids)
    probes = [
        "Ada really enjoys hiking in the Alps.",
        "Ada moved to Lisbon.",
        "Ada is a nurse at the hospital.",
        "Ada's favourite film is Aliens.",
    ]
    exact = _nearest(db, embedder, ids, probes)
    _build_index(db, embedder, ids)
    through_index = _nearest(db, embedder, ids, probes)
    assert [n[0] for n in through_index] == [n[0] for n in exact]
    assert [n[0] for n in exact] == [FACTS[1], FACTS[0], FACTS[2], FACTS[3]]


def test_a_large_user_reconciles_through_its_index_with_the_same_decisions(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    _large_user(db, embedder, ids)
    _build_index(db, embedder, ids)
    name = index_name(ids["tenant"], ids["user"], embedder.model_name)
    texts = [
        "Ada enjoys hiking in the Alps.",  # exact: reinforce
        "Ada really enjoys hiking in the Alps.",  # paraphrase: merge
        "Ada moved to Lisbon.",  # changed fact: supersede
    ]
    cands = [_candidate(ids, t, 10 + i) for i, t in enumerate(texts)]
    with db.begin() as session:
        # Only the plans that read every row are ruled out; the user's index and the
        # user's btree (then a sort) are both still open to the planner.
        session.execute(text("SET LOCAL enable_seqscan = off"))
        session.execute(text("SET LOCAL enable_bitmapscan = off"))
        report = reconcile_batch(
            session,
            cands,
            embedder.embed(texts),
            embedding_model=embedder.model_name,
            policy=ReconcilePolicy(),
        )
        scans = session.execute(
            # Index scans of this transaction, not yet flushed to the cumulative views.
            text("SELECT pg_stat_get_xact_numscans(CAST(:n AS regclass))"),
            {"n": name},
        ).scalar()
    assert (report.reinforced, report.merged, report.superseded) == (1, 1, 1)
    assert scans and scans >= 1
    with db() as session:
        live = session.scalars(
            select(Memory.content).where(
                Memory.tenant == ids["tenant"],
                Memory.superseded_by.is_(None),
                Memory.content.not_like("filler%"),
            )
        ).all()
    assert "Ada lives in Berlin." not in live and "Ada moved to Lisbon." in live
    # The row versions the batch wrote into the indexes wait outside the graph: the new
    # memory and the superseded one's new version alike.
    deferred = _deferred(db, ids)
    assert deferred["Ada moved to Lisbon."] and deferred["Ada lives in Berlin."]


def _deferred(db: sessionmaker[Session], ids: dict[str, str]) -> dict[str, bool]:
    with db() as session:
        rows = session.execute(
            select(Memory.content, Memory.ann_deferred).where(
                Memory.tenant == ids["tenant"], Memory.content.not_like("filler%")
            )
        ).all()
    return {r.content: r.ann_deferred for r in rows}


def _index_scans(session: Session, name: str) -> int:
    return int(
        session.execute(
            text("SELECT pg_stat_get_xact_numscans(CAST(:n AS regclass))"), {"n": name}
        ).scalar_one()
    )


def test_new_rows_of_a_large_user_skip_its_index_until_folded_and_are_found_meanwhile(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    _large_user(db, embedder, ids)
    _build_index(db, embedder, ids)
    new = "Ada adopted a grey cat named Milo."
    assert _reconcile(db, embedder, ids, [new])["added"] == 1
    deferred = _deferred(db, ids)
    assert deferred[new] is True
    assert not any(deferred[f] for f in FACTS)  # stored before the index: in it

    # In the tail, the row is still a neighbour: its paraphrase merges into it, and a
    # search finds it.
    assert _reconcile(db, embedder, ids, ["Ada adopted a grey cat called Milo."])["merged"] == 1
    settings = Settings()
    params = params_from_settings(
        settings, tenant=ids["tenant"], user_id=ids["user"],
        query_vector=embedder.embed(["What is the name of Ada's cat?"])[0],
        embedding_model=embedder.model_name, query_text="Ada cat name",
    )  # fmt: skip
    params = replace(params, ann_dims=embedder.dimensions)
    with db() as session:
        hits = search_sync(session, params)
    assert hits and "Milo" in hits[0].content

    # Folded: the flag is cleared and the index answers for the row.
    assert fold_ann_tails(db.kw["bind"]) >= 1
    assert not any(_deferred(db, ids).values())
    name = index_name(ids["tenant"], ids["user"], embedder.model_name)
    with db() as session:
        session.execute(text("SET LOCAL enable_seqscan = off"))
        session.execute(text("SET LOCAL enable_bitmapscan = off"))
        found = fetch_neighbours(
            session, [_candidate(ids, "Ada's cat is called Milo.", 30)],
            embedder.embed(["Ada's cat is called Milo."]),
            embedding_model=embedder.model_name, k=3,
        )  # fmt: skip
        assert _index_scans(session, name) >= 1
    assert "Milo" in max(found[0], key=lambda n: n.similarity).content
    with db() as session:
        hits = search_sync(session, params)
    assert hits and "Milo" in hits[0].content
