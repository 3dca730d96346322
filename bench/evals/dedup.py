"""Dedup evaluation: precision and recall of the local merge decision on MRPC train,
against the paraphrase label, over a sweep of cosine thresholds, with and without
the fact guard (memwell/pipeline/dedup.py).

Run from the repo root: ``python -m bench.evals.dedup``. Prints tables.
``--precisions fp32,int8``: the same for memories embedded at each local precision
(MEMWELL_LOCAL_EMBEDDING_PRECISION), then one line per precision at the chosen
threshold: int8 memories ship only if the merge precision stays >= 0.90.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import numpy as np

from bench.harness.evaldata import require
from memwell.core.settings import Settings
from memwell.embeddings import Embedder, build_embedder
from memwell.pipeline.dedup import decide_merge, fact_guard

THRESHOLDS = (0.70, 0.75, 0.80, 0.82, 0.85, 0.88, 0.90, 0.92, 0.95)
CHOSEN = Settings().merge_threshold


def load_pairs() -> tuple[list[str], list[str], np.ndarray]:
    path = require("paraphrase/mrpc-train.tsv")
    a, b, y = [], [], []
    with path.open(encoding="utf-8-sig") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        next(reader)
        for row in reader:
            if len(row) < 5:
                continue
            y.append(row[0] == "1")
            a.append(row[3])
            b.append(row[4])
    return a, b, np.asarray(y)


def prf(pred: np.ndarray, y: np.ndarray) -> tuple[float, float, int]:
    tp = int((pred & y).sum())
    merged = int(pred.sum())
    return (tp / merged if merged else float("nan")), tp / int(y.sum()), merged


def cosines(embedder: Embedder, a: list[str], b: list[str]) -> np.ndarray:
    """Pair cosines; cached in MEMWELL_BENCH_CACHE (if set) to iterate on the rule."""
    cache_dir = os.environ.get("MEMWELL_BENCH_CACHE")
    cache = Path(cache_dir) / f"mrpc-{embedder.model_name}.npy" if cache_dir else None
    if cache is not None and cache.exists():
        return np.asarray(np.load(cache))
    started = time.perf_counter()
    out = np.empty(len(a), dtype=np.float32)
    step = 256
    for i in range(0, len(a), step):
        va, vb = embedder.embed(a[i : i + step]), embedder.embed(b[i : i + step])
        out[i : i + step] = (va * vb).sum(axis=1)
        print(f"  embedded {min(i + step, len(a))}/{len(a)} pairs", file=sys.stderr)
    print(f"embedding took {time.perf_counter() - started:.1f} s", file=sys.stderr)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precisions", default="", help="e.g. fp32,int8 (default: settings)")
    args = parser.parse_args()
    a, b, y = load_pairs()
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()] or [None]
    chosen = []
    for precision in precisions:
        chosen.append(evaluate(a, b, y, precision))
    if len(chosen) > 1:
        print(f"\nat the chosen threshold {CHOSEN:g}, cosine + guard:")
        print(f"{'memories':<10}{'P':>7}{'R':>7}{'merges':>8}")
        for precision, (p2, r2, m2) in zip(precisions, chosen, strict=True):
            print(f"{precision:<10}{p2:>7.3f}{r2:>7.3f}{m2:>8}")


def evaluate(
    a: list[str], b: list[str], y: np.ndarray, precision: str | None
) -> tuple[float, float, int]:
    """Print the sweep for one precision; returns (P, R, merges) at the chosen threshold."""
    settings = Settings(embedding_provider="local")
    if precision is not None:
        settings = settings.model_copy(update={"local_embedding_precision": precision})
    embedder = build_embedder(settings)
    cos = cosines(embedder, a, b)
    guard_ok = np.asarray([fact_guard(x, z) is None for x, z in zip(a, b, strict=True)])
    print(f"MRPC train: {len(y)} pairs, {int(y.sum())} paraphrases; model {embedder.model_name}")
    print(
        f"fact guard passes {guard_ok.mean():.1%} of pairs "
        f"({guard_ok[y].mean():.1%} of paraphrases, {guard_ok[~y].mean():.1%} of others)"
    )
    print(
        f"{'threshold':>9} | {'cosine only: P':>15} {'R':>6} {'merges':>7} |"
        f" {'cosine + guard: P':>18} {'R':>6} {'merges':>7}"
    )
    at_chosen = (float("nan"), float("nan"), 0)
    for t in THRESHOLDS:
        p1, r1, m1 = prf(cos >= t, y)
        pred = np.asarray(
            [
                decide_merge(x, z, float(c), threshold=t).merge
                for x, z, c in zip(a, b, cos, strict=True)
            ]
        )
        p2, r2, m2 = prf(pred, y)
        mark = ""
        if abs(t - CHOSEN) < 1e-9:
            mark, at_chosen = "  <- chosen", (p2, r2, m2)
        print(f"{t:>9.2f} | {p1:>15.3f} {r1:>6.3f} {m1:>7} | {p2:>18.3f} {r2:>6.3f} {m2:>7}{mark}")
    print(f"base rate (merge everything): precision {y.mean():.3f}")
    print("goal: precision >= 0.90 at the chosen threshold (MEMWELL_MERGE_THRESHOLD)")
    return at_chosen


if __name__ == "__main__":
    main()
