"""Figure 4, local-mode consolidation: turns/s end to end through a real Celery worker,
beside the raw embedder on the very texts the worker embeds, measured in the same run.

    python -m bench.figures.pipeline [--turns N] [--concurrency C]
    python -m bench.figures.pipeline --data ../shared/data/locomo/locomo-dev.json
    python -m bench.figures.pipeline --data FILE --precision int8
    python -m bench.figures.pipeline --processes 1,2,4,8,14 --shape interleaved --turns 8280

Starts embedded Postgres and Valkey (unless DATABASE_URL / REDIS_URL are set), a worker
subprocess, enqueues the turns through `memwell.enqueue_turns`, and times enqueue ->
every turn processed. Without `--data`: the LoCoMo dev turns topped up with short
synthetic ones to `--turns`; with it: that file's turns only (`--turns` caps them).

The raw embedder is the floor: the memory texts local extraction makes of those turns
(what the worker embeds), embedded as the worker does, in as many processes as the
worker has, each with the worker's intra-op threads, batch size and precision, timed
before and after the pipeline (the mean is the floor; both are printed, so a busy host
shows). When memories are int8 it is also timed at fp32: int8 memories pay only if the
pipeline beats the fp32 embedder by a wide margin (goal >= 1.6x).

`--processes 1,2,4,...` runs a series in one command: for each count, a fresh tenant,
a worker with that many pool processes (threads: cores / processes), and the raw
embedder at the same count just before it. `--shape` picks how the turns arrive
(bench/harness/turn_shapes.py): many users interleaved, one conversation after
another, or a single heavy user. Beside turns/s it prints what the batches waited for
users' locks, their reconcile time and how many users each held (the worker's stats).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
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
from typing import Any

import redis

import memwell
from bench.harness.drain import processed_turns, wait_processed
from bench.harness.headline import ReportRow, add_json_flag, figure_main
from bench.harness.host import describe_host, describe_onnx, tree_cpu_s
from bench.harness.locomo_data import stored_views
from bench.harness.stack import LOCOMO_DEFAULT
from bench.harness.turn_shapes import SHAPES, shape_turns
from memwell.core.settings import Settings
from memwell.db import migrate
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.intake.dispatch import producer_app
from memwell.intake.importers import read_locomo
from memwell.intake.turns import TurnIn
from memwell.local.embedded import EmbeddedPostgres, EmbeddedRedis
from memwell.pipeline.extract import extract_local
from memwell.pipeline.stats import STATS_KEY, read_stats

PRECISION_ENV = "MEMWELL_LOCAL_EMBEDDING_PRECISION"
GOAL_SHARE = 0.85  # of the raw embedder at the shipped precision
GOAL_INT8_GAIN = 1.6  # x the raw fp32 embedder, when int8 memories ship


def pipeline_turns(limit: int, data: Path | None = None) -> list[TurnIn]:
    """`data`'s turns as `memwell import` reads them (at most `limit`, 0: all); without
    `data`, the LoCoMo dev turns topped up with synthetic ones, `limit` in all."""
    if data is not None:
        turns = list(read_locomo(data))
        return turns[:limit] if limit else turns
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
def _services() -> Iterator[tuple[str, str, list[int]]]:
    """(database URL, Redis URL, the servers' pids: their CPU is counted when known)."""
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        yield os.environ["DATABASE_URL"], os.environ["REDIS_URL"], []
        return
    root = Path(tempfile.mkdtemp(prefix="memwell-bench-"))
    pg = EmbeddedPostgres(pgdata=root / "pg", database="memwell_bench")
    rd = EmbeddedRedis(data_dir=root / "redis", appendonly=False)
    try:
        urls = pg.start(), rd.start()
        yield *urls, [p for p in (pg.pid, rd.pid) if p is not None]
    finally:
        rd.stop()
        pg.stop()


def worker_threads(settings: Settings, processes: int) -> int:
    """The intra-op threads each worker process gives its embedder (worker/runtime.py)."""
    if settings.embed_threads is not None:
        return settings.embed_threads
    return max(1, (os.cpu_count() or 1) // max(1, processes))


def _embed_share(
    texts: list[str], precision: str, batch: int, threads: int, start: Any, out: Any
) -> None:
    """One raw-embedder process: load the model as a worker does, wait for the others,
    embed its share in calls of `batch` texts, report (texts, first start, last end)."""
    from memwell.embeddings import build_embedder

    settings = Settings(
        embedding_provider="local", embedding_batch_size=batch, local_embedding_precision=precision
    )
    embedder = build_embedder(settings, threads=threads)
    embedder.embed(texts[:batch])  # warm-up: allocations, thread pool, first run
    start.wait()
    t0, cpu0 = time.perf_counter(), time.process_time()
    for i in range(0, len(texts), batch):
        embedder.embed(texts[i : i + batch])
    out.put((len(texts), t0, time.perf_counter(), time.process_time() - cpu0))


@dataclass(frozen=True)
class RawRate:
    texts_per_s: float
    #: CPU seconds per text, summed over the processes: what a busy host moves least
    cpu_s_per_text: float


def raw_embedder_rate(
    texts: list[str], *, precision: str, batch: int, processes: int, threads: int
) -> RawRate:
    """Texts/s of `processes` raw embedders at once, each on its share of `texts`
    (whole batches dealt round-robin), as the worker's pool processes embed."""
    ctx = mp.get_context("spawn")
    batches = [texts[i : i + batch] for i in range(0, len(texts), batch)]
    shares = [[t for b in batches[p::processes] for t in b] for p in range(processes)]
    start, out = ctx.Barrier(processes), ctx.Queue()
    procs = [
        ctx.Process(target=_embed_share, args=(share, precision, batch, threads, start, out))
        for share in shares
    ]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=3600) for _ in procs]
    for proc in procs:
        proc.join()
    n = sum(r[0] for r in results)
    wall = max(r[2] for r in results) - min(r[1] for r in results)
    return RawRate(n / wall, sum(r[3] for r in results) / n)


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
    data: str = "LoCoMo dev + synthetic"
    precision: str = "fp32"
    #: the raw fp32 embedder on the same texts, turns/s (= embedder_turns_per_s at fp32)
    fp32_turns_per_s: float = 0.0
    host: str = ""
    #: CPU seconds per turn: the worker, Postgres and Valkey during the run; the raw
    #: embedder at the shipped precision on the same texts. Their ratio barely moves
    #: when other work shares the host; the turns/s do.
    pipeline_cpu_ms_per_turn: float = 0.0
    embedder_cpu_ms_per_turn: float = 0.0

    def report_row(self) -> ReportRow:
        share = self.turns_per_s / self.embedder_turns_per_s
        gain = ""
        if self.precision != "fp32" and self.fp32_turns_per_s:
            gain = f"; {self.turns_per_s / self.fp32_turns_per_s:.2f}x the raw fp32 embedder"
        goal = f">= {GOAL_SHARE:.0%} of the embedder at the shipped precision"
        if self.precision != "fp32":
            goal += f", >= {GOAL_INT8_GAIN:g}x the raw fp32 embedder"
        fp32 = (
            f" (fp32: {self.fp32_turns_per_s:.0f} turns/s)"
            if self.precision != "fp32" and self.fp32_turns_per_s
            else ""
        )
        return ReportRow(
            figure=f"4. consolidation, {self.turns:,} turns ({self.data}), "
            f"{self.concurrency} worker processes, {self.precision} memories",
            measured=f"{self.turns_per_s:.0f} turns/s ({share:.0%} of the embedder{gain})",
            baseline=f"raw {self.precision} embedder on the same texts, same processes, "
            f"threads and batch: {self.embedder_sentences_per_s:.0f} texts/s = "
            f"{self.embedder_turns_per_s:.0f} turns/s{fp32}",
            goal=goal,
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=None,
                        help="turns (default 2000; with --data: all of the file's)")  # fmt: skip
    parser.add_argument("--data", type=Path, default=None, help="a LoCoMo-format JSON file")
    parser.add_argument("--precision", choices=("fp32", "int8"), default=None,
                        help=f"precision of the stored memories (default: {PRECISION_ENV} "
                        "or the shipped default)")  # fmt: skip
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument(
        "--processes",
        type=_counts,
        default=None,
        metavar="1,2,4",
        help="run a series: one worker per count, the raw embedder beside each",
    )
    parser.add_argument(
        "--shape",
        choices=SHAPES,
        default=None,
        help="how turns arrive (default: the data's order; --turns copies "
        "the data under new conversation ids as needed)",
    )
    parser.add_argument("--users", type=int, default=15,
                        help="conversations the turns come from (data copies)")  # fmt: skip
    add_json_flag(parser)
    return parser


def _counts(value: str) -> list[int]:
    counts = [int(v) for v in value.split(",") if v.strip()]
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("a comma-separated list of process counts >= 1")
    return counts


def _raw_rates(
    texts: list[str], precisions: list[str], batch: int, processes: int, threads: int, when: str
) -> dict[str, RawRate]:
    rates = {}
    for precision in precisions:
        print(f"  raw {precision} embedder, {processes} x {threads} thread(s), {when}",
              file=sys.stderr, flush=True)  # fmt: skip
        rates[precision] = raw_embedder_rate(
            texts, precision=precision, batch=batch, processes=processes, threads=threads
        )
    return rates


def headline(argv: list[str] | None = None) -> PipelineHeadline | None:
    """Run figure 4, print its table, return its headline numbers (None: no data)."""
    args = _parser().parse_args(argv)
    if args.data is not None and not args.data.exists():
        print(f"skipped: no data at {args.data}")
        return None
    if args.processes or args.shape:
        return series(args)
    if args.precision:
        os.environ[PRECISION_ENV] = args.precision  # the worker inherits it
    settings = Settings()
    precision = settings.local_embedding_precision
    turns = pipeline_turns(args.turns or (0 if args.data else 2000), args.data)
    label = args.data.name if args.data else "LoCoMo dev + synthetic"
    views = stored_views(turns)
    texts = [
        c.content for v in views for c in extract_local(v, threshold=settings.extract_threshold)
    ]
    batch = settings.embedding_batch_size
    threads = worker_threads(settings, args.concurrency)
    precisions: list[str] = [precision, *(["fp32"] if precision != "fp32" else [])]
    onnx = describe_onnx(settings, worker_processes=args.concurrency)
    print(f"host: {describe_host()}\nonnx: {onnx}")
    print(f"{len(turns)} turns ({label}) -> {len(texts)} memory texts to embed", file=sys.stderr)
    before = _raw_rates(texts, precisions, batch, args.concurrency, threads, "before")

    with _services() as (db_url, redis_url, server_pids):
        migrate.upgrade(db_url)
        env = dict(os.environ, DATABASE_URL=db_url, REDIS_URL=redis_url, HF_HUB_OFFLINE="1")
        env["MEMWELL_EMBEDDING_PROVIDER"] = "local"
        env[PRECISION_ENV] = precision
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        worker = _start_worker(env, args.concurrency)
        client = redis.Redis.from_url(redis_url)
        client.delete(STATS_KEY)
        sessions = make_sessionmaker(make_engine(db_url, pool_size=1))
        counted = [worker.pid, *server_pids]
        try:
            cpu0 = tree_cpu_s(counted)
            started = time.perf_counter()
            memwell.enqueue_turns(turns, tenant="bench", broker_url=redis_url, chunk_size=100)
            enqueued = time.perf_counter() - started
            wait_processed(sessions, len(turns))
            elapsed = time.perf_counter() - started
            pipeline_cpu = tree_cpu_s(counted) - cpu0
        finally:
            worker.terminate()
            worker.wait(timeout=30)
        stats = read_stats(client)
        client.close()

    after = _raw_rates(texts, precisions, batch, args.concurrency, threads, "after")
    raw = {p: (before[p].texts_per_s + after[p].texts_per_s) / 2 for p in precisions}
    raw_cpu = (before[precision].cpu_s_per_text + after[precision].cpu_s_per_text) / 2
    raw_cpu_turn, pipe_cpu_turn = raw_cpu * len(texts) / len(turns), pipeline_cpu / len(turns)
    per_turn = len(texts) / len(turns)
    rate = len(turns) / elapsed
    embed_rate, embed_turn_rate = raw[precision], raw[precision] / per_turn
    batches = stats.get("batches", 0) or 1
    w = 52
    print(f"\nLocal-mode consolidation, {len(turns)} turns ({label}), {precision} memories, "
          f"worker {args.concurrency} process(es) x {threads} thread(s), "
          f"batch {batch}")  # fmt: skip
    print(f"{'what':<{w}}{'value':>12}")
    for p in precisions:
        print(f"{f'raw {p} embedder, texts/s (before / after)':<{w}}"
              f"{raw[p]:>12.0f}   ({before[p].texts_per_s:.0f} / "
              f"{after[p].texts_per_s:.0f})")  # fmt: skip
        print(f"{f'raw {p} embedder, turns/s equivalent':<{w}}{raw[p] / per_turn:>12.0f}")
    print(f"{'pipeline end to end, turns/s':<{w}}{rate:>12.0f}")
    print(f"{f'pipeline / raw {precision} embedder (goal >= {GOAL_SHARE:.0%})':<{w}}"
          f"{rate / embed_turn_rate:>12.0%}")  # fmt: skip
    if precision != "fp32":
        print(f"{f'pipeline / raw fp32 embedder (goal >= {GOAL_INT8_GAIN:g}x)':<{w}}"
              f"{rate / (raw['fp32'] / per_turn):>11.2f}x")  # fmt: skip
    print(f"{'CPU ms per turn: pipeline (worker+Postgres+Valkey)':<{w}}"
          f"{pipe_cpu_turn * 1000:>12.1f}")  # fmt: skip
    print(f"{f'CPU ms per turn: raw {precision} embedder':<{w}}{raw_cpu_turn * 1000:>12.1f}")
    print(f"{'raw embedder CPU / pipeline CPU (busy-host-proof share)':<{w}}"
          f"{raw_cpu_turn / pipe_cpu_turn:>12.0%}")  # fmt: skip
    print(f"{'turns / memory texts':<{w}}{len(turns):>6} /{len(texts):>5}")
    print(f"{'enqueue time, s':<{w}}{enqueued:>12.2f}")
    print(f"{'consolidate batches / mean turns per batch':<{w}}"
          f"{int(batches):>6} /{stats.get('turns', 0) / batches:>5.1f}")  # fmt: skip
    busy = sum(stats.get(k, 0) for k in ("analyze_ms", "embed_ms", "reconcile_ms")) / 1000
    print("worker time by step (summed over processes, s; share of the steps' sum):")
    for step in ("analyze_ms", "embed_ms", "reconcile_ms"):
        s = stats.get(step, 0) / 1000
        print(f"  {step[:-3]:<{w - 2}}{s:>12.2f}   {s / busy if busy else 0:.0%}")
    print(f"  {'wall clock':<{w - 2}}{elapsed:>12.2f}")
    print(f"  {'raw embedder alone would take':<{w - 2}}{len(texts) / embed_rate:>12.2f}")
    return PipelineHeadline(
        turns=len(turns),
        concurrency=args.concurrency,
        turns_per_s=rate,
        embedder_sentences_per_s=embed_rate,
        embedder_turns_per_s=embed_turn_rate,
        data=label,
        precision=precision,
        fp32_turns_per_s=raw["fp32"] / per_turn,
        host=describe_host(),
        pipeline_cpu_ms_per_turn=pipe_cpu_turn * 1000,
        embedder_cpu_ms_per_turn=raw_cpu_turn * 1000,
    )


@dataclass(frozen=True)
class SeriesRow:
    processes: int
    threads: int
    turns_per_s: float
    embedder_turns_per_s: float
    batches: int
    lock_wait_ms_per_batch: float
    analyze_ms_per_batch: float
    embed_ms_per_batch: float
    reconcile_ms_per_batch: float
    #: process time per batch outside the three steps: claim, commit, queue, idle
    other_ms_per_batch: float
    users_per_batch: float
    turns_per_batch: float


@dataclass(frozen=True)
class SeriesHeadline:
    """The process series: one row per worker process count, same turns, same run."""

    shape: str
    turns: int
    users: int
    memory_texts: int
    precision: str
    host: str
    rows: list[SeriesRow]


def _drain(
    env: dict[str, str], redis_url: str, db_url: str, turns: list[TurnIn], tenant: str, c: int
) -> tuple[float, dict[str, float]]:
    """One worker of `c` processes consolidates `turns` as `tenant`: (seconds, stats)."""
    worker = _start_worker(env, c)
    client = redis.Redis.from_url(redis_url)
    client.delete(STATS_KEY)
    engine = make_engine(db_url, pool_size=1)
    sessions = make_sessionmaker(engine)
    try:
        before = processed_turns(sessions)
        started = time.perf_counter()
        memwell.enqueue_turns(turns, tenant=tenant, broker_url=redis_url, chunk_size=100)
        wait_processed(sessions, before + len(turns))
        elapsed = time.perf_counter() - started
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        engine.dispose()
    stats = read_stats(client)
    client.close()
    return elapsed, stats


def series(args: argparse.Namespace) -> SeriesHeadline:
    """Run the process series, print its table, return it."""
    if args.precision:
        os.environ[PRECISION_ENV] = args.precision
    settings = Settings()
    precision = settings.local_embedding_precision
    shape = args.shape or "sequential"
    counts = args.processes or [args.concurrency]
    source = list(read_locomo(args.data or LOCOMO_DEFAULT))
    turns = shape_turns(source, shape, args.turns or len(source), users=args.users)
    views = stored_views(turns)
    texts = [
        c.content for v in views for c in extract_local(v, threshold=settings.extract_threshold)
    ]
    per_turn = len(texts) / len(turns)
    batch = settings.embedding_batch_size
    users = len({t.user_id for t in turns})
    print(f"host: {describe_host()}")
    print(f"{len(turns)} turns ({shape}, {users} users) -> {len(texts)} memory texts",
          file=sys.stderr)  # fmt: skip
    rows: list[SeriesRow] = []
    with _services() as (db_url, redis_url, _pids):
        migrate.upgrade(db_url)
        env = dict(os.environ, DATABASE_URL=db_url, REDIS_URL=redis_url, HF_HUB_OFFLINE="1")
        env |= {"MEMWELL_EMBEDDING_PROVIDER": "local", PRECISION_ENV: precision}
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        for c in counts:
            threads = worker_threads(settings, c)
            raw = _raw_rates(texts, [precision], batch, c, threads, f"{c} process(es)")
            print(f"  pipeline, {c} process(es)", file=sys.stderr, flush=True)
            elapsed, stats = _drain(env, redis_url, db_url, turns, f"bench-{shape}-c{c}", c)
            n = stats.get("batches", 0) or 1
            steps = {k: stats.get(f"{k}_ms", 0) / n for k in ("analyze", "embed", "reconcile")}
            rows.append(
                SeriesRow(
                    processes=c,
                    threads=threads,
                    turns_per_s=len(turns) / elapsed,
                    embedder_turns_per_s=raw[precision].texts_per_s / per_turn,
                    batches=int(stats.get("batches", 0)),
                    lock_wait_ms_per_batch=stats.get("lock_wait_ms", 0) / n,
                    analyze_ms_per_batch=steps["analyze"],
                    embed_ms_per_batch=steps["embed"],
                    reconcile_ms_per_batch=steps["reconcile"],
                    other_ms_per_batch=elapsed * c * 1000 / n - sum(steps.values()),
                    users_per_batch=stats.get("users", 0) / n,
                    turns_per_batch=stats.get("turns", 0) / n,
                )
            )
    _print_series(rows, shape, len(turns), users, precision)
    return SeriesHeadline(shape, len(turns), users, len(texts), precision, describe_host(), rows)


def _print_series(
    rows: list[SeriesRow], shape: str, turns: int, users: int, precision: str
) -> None:
    print(f"\nLocal-mode consolidation by worker processes: {turns} turns, {shape}, "
          f"{users} users, {precision} memories (one run; compare within it)")  # fmt: skip
    print("| processes | threads each | pipeline turns/s | raw embedder turns/s "
          "| pipeline / embedder | speed-up vs first | lock wait ms / batch "
          "| analyze / embed / reconcile / other ms per batch | users / batch "
          "| turns / batch |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    first = rows[0].turns_per_s
    for r in rows:
        print(f"| {r.processes} | {r.threads} | {r.turns_per_s:.0f} | "
              f"{r.embedder_turns_per_s:.0f} | {r.turns_per_s / r.embedder_turns_per_s:.0%} | "
              f"{r.turns_per_s / first:.2f} | {r.lock_wait_ms_per_batch:.1f} | "
              f"{r.analyze_ms_per_batch:.0f} / {r.embed_ms_per_batch:.0f} / "
              f"{r.reconcile_ms_per_batch:.0f} / {r.other_ms_per_batch:.0f} | "
              f"{r.users_per_batch:.1f} | "
              f"{r.turns_per_batch:.1f} |")  # fmt: skip


def main() -> int:
    return figure_main(headline, _parser())


if __name__ == "__main__":
    raise SystemExit(main())
