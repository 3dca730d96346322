"""The entity tables as consolidation's writer fills them, against the real Postgres and
the real local embedder: memories go through reconcile (the one write path), and the
entities, aliases, links and relations are read back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, delete, pool, select
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import Settings
from memwell.db.models import Entity, EntityAlias, EntityRelation, Memory, MemoryEntity
from memwell.db.tenancy import make_tenant_sessionmaker, tenant_transaction
from memwell.embeddings import Embedder, build_embedder
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.reconcile import ReconcilePolicy, reconcile_batch

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def embedder(stack_env: dict[str, str]) -> Embedder:
    return build_embedder(Settings(embedding_provider="local"))


def _candidate(ids: dict[str, str], content: str, turn: str, day: int) -> Candidate:
    return Candidate(
        tenant=ids["tenant"],
        user_id=ids["user"],
        session_id=ids["session"],
        kind="fact",
        content=content,
        importance=0.6,
        event_time=T0 + timedelta(days=day),
        source_turn_ids=[turn],
    )


def _store(
    db: sessionmaker[Session],
    embedder: Embedder,
    ids: dict[str, str],
    contents: list[str],
    *,
    first_day: int = 0,
    policy: ReconcilePolicy | None = None,
) -> None:
    cands = [
        _candidate(ids, text, f"turn-{first_day + i}", first_day + i)
        for i, text in enumerate(contents)
    ]
    with db.begin() as session:
        reconcile_batch(
            session,
            cands,
            embedder.embed(contents),
            embedding_model=embedder.model_name,
            policy=policy or ReconcilePolicy(),
        )


def _entities(db: sessionmaker[Session], ids: dict[str, str]) -> dict[str, Entity]:
    with db() as session:
        rows = session.scalars(select(Entity).where(Entity.tenant == ids["tenant"]))
        return {e.key: e for e in rows}


def _aliases(db: sessionmaker[Session], ids: dict[str, str]) -> dict[str, str]:
    with db() as session:
        rows = session.execute(
            select(EntityAlias.alias, Entity.key)
            .join(Entity, Entity.id == EntityAlias.entity_id)
            .where(EntityAlias.tenant == ids["tenant"])
        )
        return {alias: key for alias, key in rows}


def _relations(
    db: sessionmaker[Session], ids: dict[str, str], relation: str
) -> list[EntityRelation]:
    with db() as session:
        return list(
            session.scalars(
                select(EntityRelation)
                .where(EntityRelation.tenant == ids["tenant"], EntityRelation.relation == relation)
                .order_by(EntityRelation.valid_from)
            )
        )


def test_memories_link_their_entities_and_count_mentions(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    _store(
        db,
        embedder,
        ids,
        [
            "Caroline went to an LGBTQ support group on 7 May 2023.",
            "Melanie's kids love the dinosaur exhibit at the museum.",
            "Caroline is painting a lake sunrise for the art show.",
        ],
    )
    entities = _entities(db, ids)
    assert entities["caroline"].kind == "person"
    assert entities["caroline"].mention_count == 2
    assert entities["support group"].kind == "organization"
    assert entities["melanie's kid"].kind == "person"
    with db() as session:
        links = session.execute(
            select(Memory.content, Entity.key)
            .join(MemoryEntity, MemoryEntity.memory_id == Memory.id)
            .join(Entity, Entity.id == MemoryEntity.entity_id)
            .where(Memory.tenant == ids["tenant"])
        ).all()
    assert ("Melanie's kids love the dinosaur exhibit at the museum.", "dinosaur exhibit") in links
    child = _relations(db, ids, "child")
    assert [(r.single_valued, r.valid_to, r.superseded_by) for r in child] == [(False, None, None)]
    assert child[0].source_turn_ids == ["turn-1"]
    # Said again in another memory: reinforced, no second edge, one more mention.
    _store(db, embedder, ids, ["Melanie's kids built a sandcastle on the beach."], first_day=5)
    assert len(_relations(db, ids, "child")) == 1
    assert _entities(db, ids)["melanie's kid"].mention_count == 2


def test_lives_in_supersedes_the_old_edge(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    _store(db, embedder, ids, ["Ada lives in Berlin with her cat Miso."])
    _store(db, embedder, ids, ["Ada lives in Berlin now."], first_day=3)  # the same value
    (only,) = _relations(db, ids, "lives_in")
    assert only.superseded_by is None and sorted(only.source_turn_ids) == ["turn-0", "turn-3"]
    _store(db, embedder, ids, ["Ada moved to Lisbon in October."], first_day=10)
    old, new = _relations(db, ids, "lives_in")
    entities = _entities(db, ids)
    assert old.object_id == entities["berlin"].id and new.object_id == entities["lisbon"].id
    assert old.superseded_by == new.id and old.valid_to == new.valid_from == T0 + timedelta(days=10)
    assert new.superseded_by is None and new.valid_to is None and new.single_valued
    assert entities["lisbon"].kind == "place"
    with db() as session:  # provenance: the memories that stated each value
        stated = dict(session.execute(select(Memory.id, Memory.content)).all())
    assert stated[old.memory_id] == "Ada lives in Berlin with her cat Miso."
    assert stated[new.memory_id] == "Ada moved to Lisbon in October."
    (pet,) = _relations(db, ids, "has_pet")
    assert pet.subject_id == entities["ada"].id and pet.object_id == entities["miso"].id
    assert _aliases(db, ids)["ada's cat"] == "miso"


def test_one_batch_applies_its_changes_in_order(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    _store(db, embedder, ids, ["Sam works at Acme Corp.", "Sam works at Globex Labs."])
    first, second = _relations(db, ids, "works_at")
    assert first.superseded_by == second.id and second.superseded_by is None


def test_first_name_and_relative_merge_into_the_named_entity(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    _store(
        db,
        embedder,
        ids,
        ["Caroline adopted a puppy last spring.", "Caroline's sister lives in Boston."],
    )
    before = _entities(db, ids)
    assert {"caroline", "caroline's sister"} <= set(before)
    _store(
        db,
        embedder,
        ids,
        ["Caroline Smith started a new pottery class.", "Caroline's sister Ana visited in June."],
        first_day=4,
    )
    after = _entities(db, ids)
    assert "caroline" not in after and "caroline's sister" not in after
    assert after["caroline smith"].id is not None and after["caroline smith"].mention_count == 4
    aliases = _aliases(db, ids)
    assert aliases["caroline"] == "caroline smith"
    assert aliases["caroline's sister"] == "ana"
    (lives,) = _relations(db, ids, "lives_in")
    assert lives.subject_id == after["ana"].id  # moved from the merged "caroline's sister"
    siblings = _relations(db, ids, "sibling")
    assert {r.subject_id for r in siblings} == {after["caroline smith"].id}
    assert {r.object_id for r in siblings} == {after["ana"].id}
    # Later memories that say only "Caroline" land on the full name.
    _store(db, embedder, ids, ["Caroline loves hiking in the mountains."], first_day=9)
    final = _entities(db, ids)
    assert "caroline" not in final and final["caroline smith"].mention_count == 5


def test_entities_off_writes_none(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    _store(db, embedder, ids, ["Ada lives in Berlin."], policy=ReconcilePolicy(entities=False))
    assert _entities(db, ids) == {}


@pytest.fixture(scope="module")
def app_engine(database_url: str) -> Engine:
    return create_engine(database_url, poolclass=pool.NullPool)


def test_a_tenant_sees_only_its_own_entity_rows(
    db: sessionmaker[Session], embedder: Embedder, app_engine: Engine, ids: dict[str, str]
) -> None:
    other = {**ids, "tenant": ids["tenant"] + "-b"}
    _store(db, embedder, ids, ["Ada's brother Tom lives in Oslo."])
    _store(db, embedder, other, ["Bea's sister Liv lives in Rome."])
    maker = make_tenant_sessionmaker(app_engine)
    for tenant, key in ((ids["tenant"], "tom"), (other["tenant"], "liv")):
        with tenant_transaction(maker, tenant) as session:
            # No tenant filter: the policy supplies it.
            keys = set(session.scalars(select(Entity.key)))
            assert key in keys and {"tom", "liv"} - keys == {"liv", "tom"} - {key}
            for table in (EntityAlias, MemoryEntity, EntityRelation):
                assert set(session.scalars(select(table.tenant))) == {tenant}


def test_an_earlier_value_told_late_is_history_and_a_summary_changes_no_relation(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    _store(db, embedder, ids, ["Ada lives in Lisbon."], first_day=10)
    _store(db, embedder, ids, ["Ada lives in Berlin."], first_day=0)  # an import of old history
    berlin, lisbon = _relations(db, ids, "lives_in")
    assert berlin.superseded_by == lisbon.id and berlin.valid_to == lisbon.valid_from
    assert lisbon.superseded_by is None
    summary = replace(
        _candidate(ids, "Ada talked about life. Ada lives in Madrid.", "turn-20", 20),
        kind="summary",
    )
    with db.begin() as session:
        reconcile_batch(
            session,
            [summary],
            embedder.embed([summary.content]),
            embedding_model=embedder.model_name,
            policy=ReconcilePolicy(),
        )
    assert [r.id for r in _relations(db, ids, "lives_in") if r.superseded_by is None] == [lisbon.id]
    assert "madrid" in _entities(db, ids)  # its entities are linked all the same


def test_an_edited_memory_states_its_new_text_and_counts_follow_deleted_links(
    db: sessionmaker[Session],
    embedder: Embedder,
    ids: dict[str, str],
    api: TestClient,
    make_key: Callable[..., dict[str, str]],
) -> None:
    _store(db, embedder, ids, ["Ada lives in Berlin.", "Ada went hiking with Tom."])
    _store(db, embedder, ids, ["Ada moved to Lisbon in October."], first_day=10)
    with db() as session:
        moved = session.scalars(
            select(Memory.id).where(Memory.tenant == ids["tenant"], Memory.content.like("%Lisbon%"))
        ).one()
    edited = api.patch(
        f"/v1/memories/{moved}",
        json={"content": "Ada adopted a dog named Rex."},
        headers=make_key(ids["tenant"], ("write",)),
    )
    assert edited.status_code == 200, edited.text
    entities = _entities(db, ids)
    # The retracted move gives the slot back to the value it had replaced.
    (berlin,) = _relations(db, ids, "lives_in")
    assert berlin.object_id == entities["berlin"].id
    assert (berlin.superseded_by, berlin.valid_to) == (None, None)
    assert entities["lisbon"].mention_count == 0
    assert entities["rex"].mention_count == 1
    assert entities["ada"].mention_count == 3
    with db.begin() as session:  # a hard delete (prune, a session's deletion) cascades
        session.execute(
            delete(Memory).where(Memory.tenant == ids["tenant"], Memory.content.like("%Tom%"))
        )
    counts = {k: e.mention_count for k, e in _entities(db, ids).items()}
    assert (counts["tom"], counts["ada"], counts["berlin"]) == (0, 2, 1)
