"""LLM mode: the analysis call's answer carries each memory's entities and relations
(one call, not one more per message), and they are what the writer stores; a memory
the model gave no entities for, or a call that failed, falls back to the local
extractor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import Settings
from memwell.db.models import Entity, EntityRelation
from memwell.embeddings import Embedder, build_embedder
from memwell.entities.extract import Mention, RelationFact
from memwell.llm.structured import StructuredLLM
from memwell.llm.usage import UsageRecorder
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.consolidate import LocalAnalyzer
from memwell.pipeline.extract import TurnView
from memwell.pipeline.llm_analysis import LlmAnalyzer
from memwell.pipeline.reconcile import ReconcilePolicy, reconcile_batch
from tests.support.fake_openai import FakeOpenAI, Malformed, Reply

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)

ANSWER = {
    "memories": [
        {
            "id": 1,
            "score": 9,
            "kind": "fact",
            "content": "Caroline's sister Ana lives in Boston.",
            "entities": [
                {"name": "Caroline", "kind": "person"},
                {"name": "Ana", "kind": "person"},
                {"name": "Boston", "kind": "place"},
            ],
            "relations": [
                {"subject": "Caroline", "relation": "sibling", "object": "Ana"},
                {"subject": "Ana", "relation": "Lives in", "object": "Boston"},
                {"subject": "Ana", "relation": "age", "value": "31"},
                {"subject": "Ana", "relation": "likes"},
            ],
        },
        {"id": 1, "score": 9, "kind": "preference", "content": "Caroline loves pottery."},
    ]
}


@pytest.fixture
def llm(fake_openai: FakeOpenAI, db: sessionmaker[Session]) -> Iterator[StructuredLLM]:
    fake_openai.reset()
    client = StructuredLLM(
        model="scripted",
        base_url=fake_openai.base_url,
        api_key="k",
        timeout_s=2.0,
        max_retries=1,
        usage=UsageRecorder(db),
    )
    yield client
    client.close()


@pytest.fixture(scope="module")
def embedder(stack_env: dict[str, str]) -> Embedder:
    return build_embedder(Settings(embedding_provider="local"))


def _turn(ids: dict[str, str], content: str) -> TurnView:
    return TurnView(
        ids["tenant"], "t1", ids["user"], "s", "user", content, SAID, {"speaker": "Caroline"}
    )


def _extract(llm: StructuredLLM, turn: TurnView) -> list[Candidate]:
    analyzer = LlmAnalyzer(llm, LocalAnalyzer(threshold=0.15), window_turns=12, window_tokens=1500)
    return analyzer.analyze([turn], deadline=None).done[turn.turn_id].candidates


def test_entities_come_in_the_extraction_call_and_are_stored(
    fake_openai: FakeOpenAI,
    llm: StructuredLLM,
    db: sessionmaker[Session],
    embedder: Embedder,
    ids: dict[str, str],
) -> None:
    fake_openai.script_chat([Reply(json.dumps(ANSWER))])
    cands = _extract(llm, _turn(ids, "My sister Ana lives in Boston. I love pottery!"))
    assert len(fake_openai.chat_requests) == 1
    prompt = fake_openai.chat_requests[0].json["messages"][0]["content"]
    assert "entities" in prompt and "lives_in" in prompt
    first, second = cands
    assert first.entities is not None and second.entities is None
    assert Mention("boston", "Boston", "place") in first.entities.mentions
    assert set(first.entities.relations) == {
        RelationFact("caroline", "sibling", "ana", None, False),
        RelationFact("ana", "lives_in", "boston", None, True),
        RelationFact("ana", "age", None, "31", True),
    }  # the relation without an object or a value was dropped
    with db.begin() as session:
        reconcile_batch(
            session,
            cands,
            embedder.embed([c.content for c in cands]),
            embedding_model=embedder.model_name,
            policy=ReconcilePolicy(),
        )
    with db() as session:
        entities = dict(
            session.execute(
                select(Entity.key, Entity.kind).where(Entity.tenant == ids["tenant"])
            ).all()
        )
        relations = set(
            session.scalars(
                select(EntityRelation.relation).where(EntityRelation.tenant == ids["tenant"])
            )
        )
    # The model's entities for the first memory; the local extractor's for the second.
    assert {"caroline": "person", "ana": "person", "boston": "place"}.items() <= entities.items()
    assert entities["pottery"] == "thing"
    assert {"sibling", "lives_in", "age", "likes"} <= relations


def test_a_failed_extraction_call_falls_back_to_local_entities(
    fake_openai: FakeOpenAI, llm: StructuredLLM, ids: dict[str, str]
) -> None:
    fake_openai.script_chat([Malformed("{oops"), Malformed("{oops")])
    cands = _extract(llm, _turn(ids, "I adopted a puppy named Biscuit yesterday."))
    assert cands and all(c.entities is None for c in cands)  # the writer extracts locally
    assert cands[0].metadata["extractor"] == "local"
