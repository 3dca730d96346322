"""The full-text half of the hybrid search on text in other languages, on real Postgres:
Chinese and Japanese have no spaces, and each of their characters is a lexeme."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from memwell.retrieval.search import MemoryHit, search_sync
from tests.support.memory_factory import MODEL, NOW, QUERY, add_memory, search_params, unit

#: (language, memories, a question in that language, the memory that answers it)
CASES = [
    ("zh", ["我姐姐在汉堡住了三年了。", "我对花生过敏。", "我们的狗叫布鲁诺。"],
     "我对什么过敏？", 1),
    ("ja", ["姉はハンブルクに住んでいます。", "私はピーナッツアレルギーです。",
            "犬の名前はブルーノです。"], "ピーナッツは大丈夫ですか？", 1),
    ("de", ["Meine Schwester wohnt in Hamburg.", "Ich bin allergisch gegen Erdnüsse.",
            "Unser Hund heißt Bruno."], "Wie heißt der Hund?", 2),
    ("es", ["Mi hermana vive en Hamburgo.", "Soy alérgico a los cacahuetes.",
            "Nuestro perro se llama Bruno."], "¿Dónde vive mi hermana?", 0),
    ("fr", ["Ma sœur habite à Hambourg.", "Je suis allergique aux cacahuètes.",
            "Notre chien s'appelle Bruno."], "Comment s'appelle notre chien ?", 2),
]  # fmt: skip


def _search(db: sessionmaker[Session], ids: dict[str, str], **overrides: Any) -> list[MemoryHit]:
    base: dict[str, Any] = {
        "tenant": ids["tenant"], "user_id": ids["user"], "query_vector": QUERY,
        "embedding_model": MODEL, "k": 10, "similarity_floor": 0.0, "fusion": "score",
        "w_relevance": 1.0, "w_importance": 0.0, "w_recency": 0.0,
        "half_life_h": 24.0, "half_life_access_h": 12.0, "now": NOW,
    }  # fmt: skip
    base.update(overrides)
    with db() as session:
        return search_sync(session, search_params(**base))


@pytest.mark.parametrize(("language", "memories", "question", "answer"), CASES)
def test_a_question_matches_the_text_of_a_memory_in_its_language(
    db: sessionmaker[Session],
    ids: dict[str, str],
    language: str,
    memories: list[str],
    question: str,
    answer: int,
) -> None:
    with db.begin() as session:
        for i, content in enumerate(memories):
            # The same cosine for all: only the text rank can tell them apart.
            add_memory(
                session, tenant=ids["tenant"], user_id=ids["user"], content=content,
                embedding=unit(0.5, axis=1 + i),
            )  # fmt: skip
    hits = _search(db, ids, query_text=question)
    assert hits[0].content == memories[answer], language
    assert hits[0].text_rank > 0


def test_chinese_text_is_one_lexeme_per_character(db: sessionmaker[Session]) -> None:
    with db() as session:
        lexemes = session.execute(
            text(
                "SELECT tsvector_to_array(to_tsvector('english', "
                "public.memwell_search_text('我住在北京, in Berlin')))"
            )
        ).scalar_one()
    assert set(lexemes) == {"我", "住", "在", "北", "京", "berlin"}


def test_the_models_similarity_scale_maps_cosine_before_fusion(
    db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    with db.begin() as session:
        for i, cos in enumerate((0.9, 0.8)):
            add_memory(
                session, tenant=ids["tenant"], user_id=ids["user"], content=f"memory {i}",
                embedding=unit(cos, axis=1 + i),
            )  # fmt: skip
    hits = _search(db, ids, fusion="vector", similarity_scale=3.5)
    assert [h.similarity for h in hits] == pytest.approx([0.9, 0.8], abs=1e-5)
    assert [h.relevance for h in hits] == pytest.approx([0.65, 0.3], abs=1e-5)


def test_search_params_take_the_calibration_of_the_users_model() -> None:
    from memwell.core.model_calibration import CALIBRATIONS
    from memwell.core.settings import Settings
    from memwell.retrieval.search import params_from_settings

    settings = Settings(embedding_provider="local")  # minilm

    def params(model: str) -> Any:
        return params_from_settings(
            settings, tenant="t", user_id="u", query_vector=QUERY, embedding_model=model
        )

    e5, minilm = CALIBRATIONS["e5-small"], CALIBRATIONS["minilm"]
    assert params("multilingual-e5-small-int8").similarity_floor == e5.similarity_floor
    assert params("multilingual-e5-small").similarity_scale == pytest.approx(
        (1 - minilm.null_median) / (1 - e5.null_median)
    )
    assert params("all-MiniLM-L6-v2").similarity_scale == pytest.approx(1.0)
    assert params("openai:text-embedding-3-small").similarity_floor == settings.similarity_floor
