"""Local CPU embeddings: a local model's ONNX graph (all-MiniLM-L6-v2 by default) run
by onnxruntime.

Needs only onnxruntime and tokenizers at runtime; the graph already pools and
normalises, so its output rows are final sentence embeddings.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from memwell.embeddings.base import EmbeddingError, FloatMatrix

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
OUTPUT_NAME = "embedding"
#: Tokens per text, [CLS] and [SEP] included: the model was trained at 256. It covers
#: every LoCoMo dev text with room to spare (turns: mean 34, p99 79, max 102 tokens;
#: memory candidates: mean 28, max 107), and padding never reaches it: a chunk is padded
#: to its own longest text only.
MAX_LENGTH = 256
Precision = Literal["fp32", "int8"]
NORMALISE_FILE = "normalise.json"
_SPACE_RUNS = re.compile(" {2,}")


def _load_normalisation(path: Path) -> dict[int, str] | None:
    if not path.is_file():
        return None
    return {int(cp): out for cp, out in json.loads(path.read_text()).items()}


@dataclass(frozen=True)
class OnnxExecution:
    """How an embedder runs its graph: what a benchmark prints beside its numbers."""

    precision: str
    intra_op_threads: int
    inter_op_threads: int
    graph_optimization: str
    max_length: int
    batch_size: int
    spin: bool

    def describe(self) -> str:
        return (
            f"{self.precision}, {self.intra_op_threads} intra-op / {self.inter_op_threads} "
            f"inter-op thread(s), graph optimisation {self.graph_optimization}, sequence cap "
            f"{self.max_length} tokens, batch {self.batch_size}, "
            f"{'spinning' if self.spin else 'non-spinning'} threads"
        )


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime (CPU). Thread-safe: sessions allow concurrent runs."""

    model_name: str = MODEL_NAME
    dimensions: int = DIMENSIONS

    def __init__(
        self,
        model_path: Path,
        tokenizer_path: Path,
        *,
        threads: int | None = None,
        max_length: int = MAX_LENGTH,
        batch_size: int = 64,
        model_name: str = MODEL_NAME,
        spin: bool = True,
        precision: Precision | None = None,
        prefix: str = "",
        dimensions: int = DIMENSIONS,
        pad_token: str = "[PAD]",
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if max_length < 2:
            raise ValueError("max_length must leave room for [CLS] and [SEP]")
        self.batch_size = batch_size
        self.max_length = max_length
        # Recorded on every row: vectors of different weights never mix in a search.
        self.model_name = model_name
        self.dimensions = dimensions
        # What the model card says goes before the text ("query: " / "passage: " for e5).
        self._prefix = prefix
        # A per-codepoint map that the tokenizer cannot express, applied before it.
        self._normalisation = _load_normalisation(Path(tokenizer_path).with_name(NORMALISE_FILE))

        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # Padding is done per chunk below, after sorting, so the tokenizer only truncates.
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_length)
        pad_id = self._tokenizer.token_to_id(pad_token)
        self._pad_id = 0 if pad_id is None else pad_id

        options = ort.SessionOptions()
        intra_op = threads if threads is not None else (os.cpu_count() or 1)
        options.intra_op_num_threads = intra_op
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if not spin:
            # Idle intra-op threads spin for a while after each run by default: right for
            # a worker embedding batch after batch, wrong for one query at a time on a
            # process whose event loop and database need those cores next: spinning
            # threads stole them and tripled the buffer read's tail latency.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self._session = ort.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped exception classes
            raise EmbeddingError(f"cannot load ONNX model {model_path}: {exc}") from exc
        self._input_names = {i.name for i in self._session.get_inputs()}
        self.execution = OnnxExecution(
            precision=precision or ("int8" if "int8" in Path(model_path).name else "fp32"),
            intra_op_threads=intra_op,
            inter_op_threads=1,
            # ORT_ENABLE_ALL at load; fusing attention offline too (onnxruntime's
            # transformer optimizer) gave nothing at batch 64 and 4-9% less CPU per
            # query (bench/figures/embedder.py --fused), so the export stays the plain
            # graph that every onnxruntime and CPU can load.
            graph_optimization="all (at load)",
            max_length=max_length,
            batch_size=batch_size,
            spin=spin,
        )

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        count = len(texts)
        if count == 1:  # a query: no sorting, no batch bookkeeping
            return self._run([self._tokenizer.encode(self._prepare(texts[0]))])
        out = np.empty((count, self.dimensions), dtype=np.float32)
        if count == 0:
            return out
        # A text repeated in one call is embedded once ("ok", "thanks", a re-sent turn).
        slot: dict[str, int] = {}
        where = [slot.setdefault(t, len(slot)) for t in texts]
        unique = list(slot)
        vectors = (
            out if len(unique) == count else np.empty((len(unique), self.dimensions), np.float32)
        )
        encodings = self._tokenizer.encode_batch([self._prepare(t) for t in unique])
        # Chunks of similar token length need almost no padding, which is most of the cost.
        order = sorted(range(len(unique)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(unique), self.batch_size):
            chunk = order[start : start + self.batch_size]
            vectors[chunk] = self._run([encodings[i] for i in chunk])
        if vectors is not out:
            out[:] = vectors[where]
        return out

    def _prepare(self, text: str) -> str:
        if self._normalisation is not None:
            return _SPACE_RUNS.sub(" ", (self._prefix + text).translate(self._normalisation))
        return self._prefix + text

    def _run(self, encodings: list[Encoding]) -> FloatMatrix:
        width = max(len(e.ids) for e in encodings)
        shape = (len(encodings), width)
        input_ids = np.full(shape, self._pad_id, dtype=np.int64)
        attention_mask = np.zeros(shape, dtype=np.int64)
        token_type_ids = np.zeros(shape, dtype=np.int64)
        for row, encoding in enumerate(encodings):
            length = len(encoding.ids)
            input_ids[row, :length] = encoding.ids
            attention_mask[row, :length] = encoding.attention_mask
            token_type_ids[row, :length] = encoding.type_ids
        feeds: dict[str, npt.NDArray[np.int64]] = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": token_type_ids,
        }
        feeds = {name: value for name, value in feeds.items() if name in self._input_names}
        try:
            (embeddings,) = self._session.run([OUTPUT_NAME], feeds)
        except Exception as exc:  # onnxruntime raises its own untyped exception classes
            raise EmbeddingError(f"onnxruntime inference failed: {exc}") from exc
        return np.asarray(embeddings, dtype=np.float32)
