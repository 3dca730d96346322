"""Re-embed throughput: a store moved to another embedding model through a real worker,
next to the raw target embedder on the same texts, measured in the same run.

Run from the repo root: ``python -m bench.figures.reembed [--rows 100000] [--users 1000]
[--to local:all-MiniLM-L6-v2-int8] [--base-url URL] [--batch 256]``.

Starts embedded Postgres and Valkey and one worker process (a re-embed is one chain
of steps, so one process works at a time), COPY-loads `--rows` memories under the
local model's name, then times `reembed start` until every user has switched
(`ready`), and `finish --grace 0` until the previous vectors are dropped. The raw
figure embeds a sample of the same texts with the same target embedder, in batches
of the same size, in this process, before and after the re-embed (their mean is the
baseline: on a shared machine the load moves during a long run). Progress goes to
stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta

from sqlalchemy import text

from bench.harness.chat_stack import load_store
from bench.harness.common import print_table
from bench.harness.host import describe_host
from bench.harness.progress import progress
from bench.harness.stack import service_env, services, worker_process
from memwell.core.settings import get_settings
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.embeddings import Embedder
from memwell.reembed.lifecycle import finish_migration, get_status, start_migration
from memwell.reembed.progress import MigrationStatus
from memwell.reembed.sender import step_sender
from memwell.reembed.specs import build_target_embedder, parse_spec

POLL_S = 1.0  # progress refresh


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--to", default="local:all-MiniLM-L6-v2-int8", help="the target model")
    p.add_argument("--base-url", default=None, help="the target's OpenAI-compatible endpoint")
    p.add_argument("--batch", type=int, default=256, help="memories per re-embed batch")
    p.add_argument("--raw-sample", type=int, default=5000, help="texts the raw figure embeds")
    return p


def raw_rate(embedder: Embedder, texts: list[str], batch: int) -> float:
    """Texts per second of the bare embedder, after one warm-up batch."""
    embedder.embed(texts[:batch])
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        embedder.embed(texts[i : i + batch])
    return len(texts) / (time.perf_counter() - started)


def _wait(get: object, done: object, label: str) -> MigrationStatus:
    """Poll the migration until `done(status)`, drawing progress on stderr."""
    assert callable(get) and callable(done)
    started = time.perf_counter()
    with progress(label) as bar:
        while True:
            status: MigrationStatus = get()
            elapsed = time.perf_counter() - started
            rate = status.embedded / elapsed if elapsed else 0.0
            bar.total = status.total
            bar.update(
                status.embedded,
                f"walked, {status.state}, {status.switched_users:,} users switched, {rate:,.0f}/s",
            )
            if done(status):
                return status
            time.sleep(POLL_S)


def main() -> int:
    a = _parser().parse_args()
    host = describe_host()
    print(f"host: {host}", file=sys.stderr)
    with services() as stack:
        env = service_env(stack)
        keys = ("DATABASE_URL", "REDIS_URL", "MEMWELL_DATA_DIR", "MEMWELL_EMBEDDING_PROVIDER")
        os.environ.update({k: env[k] for k in keys})
        get_settings.cache_clear()
        settings = get_settings()
        load_store(stack, rows=a.rows, users=a.users)
        engine = make_engine(stack.database_url, pool_size=2)
        sessions = make_sessionmaker(engine)
        spec = parse_spec(a.to, base_url=a.base_url)
        embedder = build_target_embedder(settings, spec)
        with sessions() as session:
            sample = list(
                session.execute(
                    text("SELECT content FROM memories ORDER BY id LIMIT :n"),
                    {"n": a.raw_sample},
                ).scalars()
            )
        print(f"raw {spec.spec} on {len(sample):,} of the texts", file=sys.stderr)
        raw_before = raw_rate(embedder, sample, a.batch)
        assert stack.redis_url is not None
        dispatch = step_sender(stack.redis_url)
        with worker_process(stack, concurrency=1):
            started = time.perf_counter()
            m = start_migration(
                sessions,
                target=spec,
                embedder=embedder,
                tenant=None,
                user_id=None,
                batch_size=a.batch,
                rate_per_s=0.0,
                dispatch=dispatch,
            )
            ready = _wait(
                lambda: get_status(sessions, migration_id=m.id),
                lambda s: s.state == "ready",
                "walk + switch",
            )
            walk_s = time.perf_counter() - started
            started = time.perf_counter()
            finish_migration(sessions, embedder=embedder, grace=timedelta(0), dispatch=dispatch)
            _wait(
                lambda: get_status(sessions, migration_id=m.id),
                lambda s: s.old_dropped_at is not None,
                "finish + drop",
            )
            finish_s = time.perf_counter() - started
        # Again after: on a shared machine the load moves during a long run, and the
        # raw figure the re-embed is compared with is the mean of both.
        print("raw again", file=sys.stderr)
        raw_after = raw_rate(embedder, sample, a.batch)
        engine.dispose()
    raw = (raw_before + raw_after) / 2
    rate = ready.total / walk_s
    print(f"\nRe-embed of {ready.total:,} memories, {a.users:,} users, to {spec.spec}")
    print(f"host: {host}")
    print_table(
        ["what", "seconds", "memories/s", "of raw embedder"],
        [
            ["raw target embedder, before the re-embed", "", raw_before, ""],
            ["raw target embedder, after the re-embed", "", raw_after, ""],
            ["raw target embedder, mean (same texts, same batch)", "", raw, "100%"],
            ["re-embed start -> every user switched", walk_s, rate, f"{100 * rate / raw:.0f}%"],
            ["finish -> previous vectors dropped", finish_s, ready.total / finish_s, ""],
        ],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
