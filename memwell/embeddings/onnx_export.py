"""One-time build of a local embedding model's self-contained ONNX graph, without torch.

The graph is written from the packaged weights (numpy) by ``onnx_bert``; it does the
mean pooling and L2 normalisation itself, so its output "embedding" is the final
sentence vector and the runtime needs only onnxruntime and tokenizers.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memwell.embeddings.base import EmbeddingError
from memwell.embeddings.local_models import MINILM, LocalModelSpec
from memwell.embeddings.onnx_bert import (
    ATTENTION_MASK,
    INPUT_IDS,
    OPSET,
    OUTPUT_NAME,
    TOKEN_TYPE_IDS,
    build_encoder,
)

MODEL_DIRNAME = MINILM.model_name
FP32_FILENAME = "model.onnx"
INT8_FILENAME = "model.int8.onnx"
TOKENIZER_FILENAME = "tokenizer.json"
META_FILENAME = "meta.json"
LOCK_FILENAME = ".export.lock"
#: Bumped when the graph changes, so meta.json says which builder wrote a cached export.
BUILDER = "onnx_bert/1"

Progress = Callable[[str], None]


def tokenizer_path_for(model_path: Path) -> Path:
    """The tokenizer.json that ensure_onnx_model placed next to ``model_path``."""
    return model_path.with_name(TOKENIZER_FILENAME)


def ensure_onnx_model(
    cache_dir: Path,
    *,
    quantized: bool = False,
    progress: Progress | None = None,
    spec: LocalModelSpec = MINILM,
) -> Path:
    """Return ``cache_dir/<model name>/model.onnx`` (or ``model.int8.onnx``), building it
    first if it is missing.

    Safe to call from many processes at once: exporters serialise on an flock, and every
    file appears atomically (temp file in the same directory, then ``os.replace``), with
    the model file written last so its presence means the whole directory is ready.
    """
    say: Progress = progress or _silent
    model_dir = Path(cache_dir).expanduser() / spec.model_name
    target = model_dir / (INT8_FILENAME if quantized else FP32_FILENAME)
    if _ready(target):
        return target

    model_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(model_dir / LOCK_FILENAME):
        # Another process may have finished the export while we waited for the lock.
        if _ready(target):
            return target
        _remove_stale_temp_files(model_dir)
        fp32 = model_dir / FP32_FILENAME
        if not _ready(fp32):
            _export_fp32(model_dir, spec, say)
        if quantized:
            _quantize_int8(model_dir, spec, say)
    return target


def _silent(_message: str) -> None:
    return None


def _ready(model_path: Path) -> bool:
    return model_path.is_file() and tokenizer_path_for(model_path).is_file()


@contextmanager
def _exclusive_lock(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _remove_stale_temp_files(model_dir: Path) -> None:
    # We hold the exclusive lock, so no live exporter owns these: they are left over
    # from a process that died mid-export.
    for leftover in model_dir.glob(".*.tmp"):
        leftover.unlink(missing_ok=True)


@contextmanager
def _atomic_output(final: Path) -> Iterator[Path]:
    """Yield a temp path next to ``final``; move it into place only if the block succeeds."""
    fd, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    tmp = Path(name)
    # mkstemp makes the file private (0600); the cache may be shared by several users.
    tmp.chmod(0o644)
    try:
        yield tmp
        # Flush to disk before the rename, or a crash could leave an empty "ready" file.
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def _write_meta(
    model_dir: Path, spec: LocalModelSpec, variant: str, details: dict[str, Any]
) -> None:
    meta_path = model_dir / META_FILENAME
    meta: dict[str, Any] = {}
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            meta = {}
    meta.update(
        {
            "model": spec.model_name,
            "opset": OPSET,
        }
    )
    variants = meta.setdefault("variants", {})
    variants[variant] = {"created": datetime.now(UTC).isoformat(), **details}
    with _atomic_output(meta_path) as tmp:
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def _export_fp32(model_dir: Path, spec: LocalModelSpec, say: Progress) -> None:
    source = spec.source()
    say(f"Building {spec.model_name} as ONNX in {model_dir} (one time only)...")
    for name, content in {**source.extra_files, TOKENIZER_FILENAME: source.tokenizer_json}.items():
        with _atomic_output(model_dir / name) as tmp:
            tmp.write_bytes(content)
    graph = build_encoder(source.load_weights(), spec.shape)
    final = model_dir / FP32_FILENAME
    with _atomic_output(final) as tmp:
        tmp.write_bytes(graph)
        # Cached exports live forever, so refuse to publish one that is not consistent.
        _verify(tmp, model_dir / TOKENIZER_FILENAME)
        _write_meta(
            model_dir,
            spec,
            FP32_FILENAME,
            {
                "builder": BUILDER,
                "source_package": source.distribution,
                "source_version": source.distribution_version,
                "pooling": "mean",
                "normalized": True,
            },
        )
    say(f"Built {final}")


_CHECK_TEXTS = ("check", "a different batch size and length", "so that padding is exercised")


def _verify(onnx_path: Path, tokenizer_path: Path) -> None:
    """Each text alone and in a padded batch gives the same unit vector: padding is masked
    out everywhere, and the graph pools and normalises."""
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    tokenizer = Tokenizer.from_file(str(tokenizer_path))

    def run(texts: list[str]) -> Any:
        tokenizer.enable_padding()
        encodings = tokenizer.encode_batch(texts)
        feeds = {
            INPUT_IDS: np.array([e.ids for e in encodings], dtype=np.int64),
            ATTENTION_MASK: np.array([e.attention_mask for e in encodings], dtype=np.int64),
            TOKEN_TYPE_IDS: np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        (out,) = session.run([OUTPUT_NAME], {k: v for k, v in feeds.items() if k in wanted})
        return out

    batch = run(list(_CHECK_TEXTS))
    singles = np.concatenate([run([text]) for text in _CHECK_TEXTS])
    norms = np.linalg.norm(batch, axis=1)
    if not (np.allclose(batch, singles, atol=1e-5) and np.allclose(norms, 1.0, atol=1e-5)):
        raise EmbeddingError(f"the ONNX graph built at {onnx_path} is not consistent")


def _quantize_int8(model_dir: Path, spec: LocalModelSpec, say: Progress) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    say(f"Quantising {spec.model_name} to int8 (one time only)...")
    final = model_dir / INT8_FILENAME
    with _atomic_output(final) as tmp:
        # Per-tensor scales cost this model a lot (mean cosine to fp32 0.95, worst 0.88 on
        # LoCoMo turns); per-channel scales keep it at 0.99 for the same speed.
        quantize_dynamic(
            str(model_dir / FP32_FILENAME),
            str(tmp),
            weight_type=QuantType.QInt8,
            per_channel=True,
        )
        _write_meta(
            model_dir,
            spec,
            INT8_FILENAME,
            {"from": FP32_FILENAME, "weight_type": "QInt8", "per_channel": True},
        )
    say(f"Quantised {final}")
