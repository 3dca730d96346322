"""Local-mode consolidation throughput, end to end through a real Celery worker, next
to the raw embedder throughput measured in the same run on the same texts.

Run from the repo root: ``python -m bench.figures.pipeline [--turns N] [--concurrency C]``.
Starts embedded Postgres and Valkey (unless DATABASE_URL / REDIS_URL are set), a
worker subprocess, enqueues LoCoMo dev turns (or synthetic ones when the data is
missing) through `memwell.enqueue_turns`, and times enqueue -> every turn processed.
Prints a table, plus where the worker's time went (from the batch counters).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import redis

import memwell
from bench.harness.drain import wait_processed
from bench.harness.headline import ReportRow, add_json_flag, write_json
from bench.harness.locomo_data import turn_view
from bench.harness.stack import LOCOMO_DEFAULT
from memwell.core.settings import Settings
from memwell.db import migrate
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.embeddings import build_embedder
from memwell.intake.dispatch import producer_app
from memwell.intake.importers import read_locomo
from memwell.intake.turns import TurnIn
from memwell.local.embedded import EmbeddedPostgres, EmbeddedRedis
from memwell.pipeline.extract import extract_local
from memwell.pipeline.stats import STATS_KEY, read_stats


def pipeline_turns(limit: int) -> list[TurnIn]:
    """The LoCoMo dev turns as `memwell import` reads them, topped up with synthetic
    ones (or only synthetic ones without the data), `limit` in all."""
    out = list(read_locomo(LOCOMO_DEFAULT)) if LOCOMO_DEFAULT.exists() else []
    base = datetime(2024, 1, 1, tzinfo=UTC)
    i = 0
    while len(out) < limit:  # synthetic top-up (or everything, without the data)
        out.append(
            TurnIn(
                id=f"syn-{i}",
                user_id=f"syn-{i % 5}",
                session_id=f"syn-s{i // 40}",
                content=f"I went to the climbing gym number {i} with my sister yesterday.",
                created_at=base + timedelta(minutes=i),
                metadata={"speaker": "Sam"},
            )
        )
        i += 1
    return out[:limit]


@contextmanager
def _services() -> Iterator[tuple[str, str]]:
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        yield os.environ["DATABASE_URL"], os.environ["REDIS_URL"]
        return
    root = Path(tempfile.mkdtemp(prefix="memwell-bench-"))
    pg = EmbeddedPostgres(pgdata=root / "pg", database="memwell_bench")
    rd = EmbeddedRedis(data_dir=root / "redis", appendonly=False)
    try:
        yield pg.start(), rd.start()
    finally:
        rd.stop()
        pg.stop()


def _embedder_rate(texts: list[str], batch: int) -> float:
    embedder = build_embedder(Settings(embedding_provider="local", embedding_batch_size=batch))
    embedder.embed(texts[:batch])  # warm-up
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        embedder.embed(texts[i : i + batch])
    return len(texts) / (time.perf_counter() - started)


def _start_worker(env: dict[str, str], concurrency: int) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker",
        "-Q", "ingest,embed,llm,maintenance", "-c", str(concurrency), "-n", "bench@localhost",
        "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    app = producer_app(env["REDIS_URL"])
    deadline = time.monotonic() + 120
    while not app.control.ping(destination=["bench@localhost"], timeout=0.5):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("worker did not start")
    return proc


@dataclass(frozen=True)
class PipelineHeadline:
    """Figure 4: consolidation throughput next to the raw embedder's, same run."""

    turns: int
    concurrency: int
    turns_per_s: float
    embedder_sentences_per_s: float
    embedder_turns_per_s: float

    def report_row(self) -> ReportRow:
        ratio = self.turns_per_s / self.embedder_turns_per_s
        return ReportRow(
            figure=f"4. consolidation, {self.turns:,} turns, {self.concurrency} worker processes",
            measured=f"{self.turns_per_s:.0f} turns/s ({ratio:.0%} of the embedder)",
            baseline=f"raw embedder {self.embedder_sentences_per_s:.0f} sentences/s "
            f"= {self.embedder_turns_per_s:.0f} turns/s",
            goal=">= 300 turns/s and >= 50% of the embedder",
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=2)
    add_json_flag(parser)
    return parser


def headline(argv: list[str] | None = None) -> PipelineHeadline:
    """Run figure 4, print its table, return its headline numbers."""
    args = _parser().parse_args(argv)
    turns = pipeline_turns(args.turns)
    settings = Settings()
    views = [turn_view(t) for t in turns]
    texts = [
        c.content for v in views for c in extract_local(v, threshold=settings.extract_threshold)
    ]
    print(f"{len(turns)} turns -> {len(texts)} memory candidates to embed", file=sys.stderr)
    embed_rate = _embedder_rate(texts, settings.embedding_batch_size)
    embed_turn_rate = embed_rate * len(texts) / len(turns)

    with _services() as (db_url, redis_url):
        migrate.upgrade(db_url)
        env = dict(os.environ, DATABASE_URL=db_url, REDIS_URL=redis_url, HF_HUB_OFFLINE="1")
        env["MEMWELL_EMBEDDING_PROVIDER"] = "local"
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        worker = _start_worker(env, args.concurrency)
        client = redis.Redis.from_url(redis_url)
        client.delete(STATS_KEY)
        sessions = make_sessionmaker(make_engine(db_url, pool_size=1))
        try:
            started = time.perf_counter()
            memwell.enqueue_turns(turns, tenant="bench", broker_url=redis_url, chunk_size=100)
            enqueued = time.perf_counter() - started
            wait_processed(sessions, len(turns))
            elapsed = time.perf_counter() - started
        finally:
            worker.terminate()
            worker.wait(timeout=30)
        stats = read_stats(client)
        client.close()

    rate = len(turns) / elapsed
    batches = stats.get("batches", 0) or 1
    print("\nLocal-mode consolidation throughput (this machine, same run)")
    print(f"{'what':<46}{'value':>12}")
    print(
        f"{'raw embedder, sentences/s (batch ' + str(settings.embedding_batch_size) + ')':<46}"
        f"{embed_rate:>12.0f}"
    )
    print(f"{'raw embedder, turns/s equivalent':<46}{embed_turn_rate:>12.0f}")
    print(f"{'pipeline end to end, turns/s':<46}{rate:>12.0f}")
    print(f"{'pipeline / embedder (turns/s)':<46}{rate / embed_turn_rate:>12.0%}")
    print(f"{'turns / candidates':<46}{len(turns):>6} /{len(texts):>5}")
    print(f"{'enqueue time, s':<46}{enqueued:>12.2f}")
    print(
        f"{'consolidate batches / mean turns per batch':<46}"
        f"{int(batches):>6} /{stats.get('turns', 0) / batches:>5.1f}"
    )
    print("worker time by step (summed over processes, s):")
    for step in ("analyze_ms", "embed_ms", "reconcile_ms"):
        print(f"  {step[:-3]:<44}{stats.get(step, 0) / 1000:>12.2f}")
    print(f"  {'wall clock':<44}{elapsed:>12.2f}")
    print(f"worker concurrency {args.concurrency}; goal >= 300 turns/s and >= 50% of the embedder")
    return PipelineHeadline(
        turns=len(turns),
        concurrency=args.concurrency,
        turns_per_s=rate,
        embedder_sentences_per_s=embed_rate,
        embedder_turns_per_s=embed_turn_rate,
    )


def main() -> None:
    write_json(headline(), _parser().parse_args().json)


if __name__ == "__main__":
    main()
