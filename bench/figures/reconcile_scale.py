"""Reconcile cost against a user's store size: one batch reconciled for a user with
a small store and for a user with a large one, in the same run.

    python -m bench.figures.reconcile_scale [--small 500] [--large 50000] [--repeat 7]

Seeds both users in an embedded Postgres (random unit vectors: the cost of a search
does not depend on what the vectors mean), gives the large user its per-user ANN
index as the maintenance job would (it is above MEMWELL_ANN_THRESHOLD), then times
`reconcile_batch` on the same batch of memory texts (LoCoMo turns through local
extraction, embedded once) for each user, in a transaction rolled back after each
run. Goal: the large user's median within 1.5x the small user's.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from bench.harness.host import describe_host
from bench.harness.locomo_data import turn_view
from bench.harness.stack import LOCOMO_DEFAULT, postgres_only
from memwell.core.settings import Settings
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.embeddings import build_embedder
from memwell.intake.importers import read_locomo
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.extract import extract_local
from memwell.pipeline.reconcile import ReconcilePolicy, reconcile_batch
from memwell.retrieval.ann import build_user_index

GOAL_RATIO = 1.5
TENANT = "bench-scale"

_SEED = text(
    """
    INSERT INTO memories (tenant, user_id, kind, content, content_hash, embedding,
                          embedding_model, importance)
    SELECT :tenant, CAST(:user_id AS text), 'fact', 'seeded memory number ' || g,
           md5(CAST(:user_id AS text) || ' seeded memory number ' || g),
           CAST(v.vec AS vector), :model, 0.5
    FROM generate_series(CAST(:lo AS int), CAST(:hi AS int)) AS g
    CROSS JOIN LATERAL (
      SELECT array_agg(random() - 0.5) AS vec
      FROM generate_series(1, CAST(:dims AS int)) WHERE g > 0
    ) v
    """
)


def seed(session: Session, user_id: str, rows: int, model: str, dims: int) -> None:
    step = 10_000
    for lo in range(1, rows + 1, step):
        session.execute(
            _SEED,
            {"tenant": TENANT, "user_id": user_id, "model": model, "dims": dims,
             "lo": lo, "hi": min(rows, lo + step - 1)},
        )  # fmt: skip
        print(f"  seeded {min(rows, lo + step - 1):,}/{rows:,} for {user_id}", flush=True)


def batch_for(user_id: str, size: int) -> list[Candidate]:
    """Memory texts local extraction makes of the LoCoMo dev turns, re-owned by the user."""
    out: list[Candidate] = []
    for turn in read_locomo(LOCOMO_DEFAULT):
        for c in extract_local(turn_view(turn, TENANT), threshold=0.15):
            out.append(replace(c, tenant=TENANT, user_id=user_id))
        if len(out) >= size:
            return out[:size]
    return out


def time_user(
    sessions: Any, user_id: str, cands: list[Candidate], vectors: Any, model: str, repeat: int
) -> list[float]:
    policy = ReconcilePolicy()
    times: list[float] = []
    for _ in range(repeat):
        with sessions() as session:
            t0 = time.perf_counter()
            reconcile_batch(session, cands, vectors, embedding_model=model, policy=policy)
            times.append((time.perf_counter() - t0) * 1000)
            session.rollback()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=500)
    parser.add_argument("--large", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=64, help="candidates per batch")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--exact-repeat", type=int, default=3,
                        help="runs for the large user before its index (slow)")  # fmt: skip
    args = parser.parse_args()
    print(f"host: {describe_host()}")
    embedder = build_embedder(Settings(embedding_provider="local"))
    model, dims = embedder.model_name, embedder.dimensions
    with postgres_only() as stack:
        engine = make_engine(stack.database_url, pool_size=2)
        sessions = make_sessionmaker(engine)
        users = {
            "small": (f"small-{args.small}", args.small),
            "large": (f"large-{args.large}", args.large),
        }
        with sessions.begin() as session:
            for user_id, rows in users.values():
                seed(session, user_id, rows, model, dims)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("ANALYZE memories"))
        batches = {}
        for label, (user_id, _rows) in users.items():
            cands = batch_for(user_id, args.batch)
            batches[label] = (cands, embedder.embed([c.content for c in cands]))
        results: dict[str, list[float]] = {}
        for label, (user_id, _rows) in users.items():
            cands, vectors = batches[label]
            time_user(sessions, user_id, cands, vectors, model, 1)  # warm-up
            reps = args.repeat if label == "small" else args.exact_repeat
            results[label] = time_user(sessions, user_id, cands, vectors, model, reps)
        # The same large user once the maintenance job has given it its ANN index.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            t0 = time.perf_counter()
            user_id, rows = users["large"]
            build_user_index(
                conn, tenant=TENANT, user_id=user_id, model=model, dims=dims, rows=rows
            )
            print(f"  built {user_id}'s ANN index in {time.perf_counter() - t0:.1f} s")
        cands, vectors = batches["large"]
        time_user(sessions, user_id, cands, vectors, model, 1)
        results["large, ANN"] = time_user(sessions, user_id, cands, vectors, model, args.repeat)
        engine.dispose()
    small = statistics.median(results["small"])
    print(f"\nreconcile one batch of {args.batch} memory texts (median of {args.repeat} "
          f"runs, {args.exact_repeat} for the exact large user; "
          "a loaded host: compare within this run only)")  # fmt: skip
    print("| user's live memories | search | reconcile ms (median) | min | max | vs small |")
    print("|---|---|---|---|---|---|")
    rows_of = {"small": args.small, "large": args.large, "large, ANN": args.large}
    for label, r in results.items():
        how = "ANN index" if "ANN" in label else "exact scan"
        med = statistics.median(r)
        print(f"| {rows_of[label]:,} | {how} | {med:.1f} | {min(r):.1f} | {max(r):.1f} "
              f"| {med / small:.2f}x |")  # fmt: skip
    ratio = statistics.median(results["large, ANN"]) / small
    verdict = "met" if ratio <= GOAL_RATIO else "NOT met"
    print(
        f"\n{args.large:,} (ANN) vs {args.small:,}: {ratio:.2f}x (goal <= {GOAL_RATIO}x: {verdict})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
