"""Reconcile cost against a user's store size: one batch reconciled for a user with
a small store and for a user with a large one, in the same run.

    python -m bench.figures.reconcile_scale [--small 500] [--large 50000] [--tail 500]

The stores are clustered like real memories: each row is the embedding of a memory
text local extraction makes of a LoCoMo turn, pulled a random 30-90% of the way
towards a random direction. (Uniformly random vectors cost HNSW about the same, but
on them "the nearest neighbour" means nothing, so recall could not be measured.)

Times `reconcile_batch` on the same batch of memory texts (LoCoMo turns through local
extraction) for each user, in a transaction rolled back after each run:
- the small user (exact scan, as every user under MEMWELL_ANN_THRESHOLD);
- the large user before its ANN index (the exact scan, for scale);
- the large user through its index, right after the index was built (empty tail);
- the same with `--tail` rows written since and not folded in yet, which is what a
  user writing steadily has between two runs of the fold job.
Then the large user's neighbours through the index against the exact ones, on the
same batch. Goal: the large user with its tail within 1.5x the small user's median.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from typing import Any

import numpy as np
from sqlalchemy import insert, text
from sqlalchemy.orm import Session

from bench.harness.host import describe_host
from bench.harness.locomo_data import turn_view
from bench.harness.stack import LOCOMO_DEFAULT, postgres_only
from memwell.core.settings import Settings
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.db.models import Memory
from memwell.embeddings import Embedder, build_embedder
from memwell.intake.importers import read_locomo
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.extract import extract_local
from memwell.pipeline.reconcile import (
    ANN_EF_SEARCH,
    Neighbour,
    ReconcilePolicy,
    fetch_neighbours,
    reconcile_batch,
)
from memwell.retrieval.ann import build_user_index

GOAL_RATIO = 1.5
TENANT = "bench-scale"
SEED_CHUNK = 5_000


def memory_texts() -> list[str]:
    """The distinct memory texts local extraction makes of the LoCoMo dev turns."""
    out: dict[str, None] = {}
    for turn in read_locomo(LOCOMO_DEFAULT):
        for c in extract_local(turn_view(turn, TENANT), threshold=0.15):
            out[c.content] = None
    return list(out)


def clustered_vectors(base: np.ndarray, rows: int, seed: int) -> np.ndarray:
    """`rows` unit vectors, each a base vector pulled 30-90% towards a random direction."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((rows, base.shape[1])).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    pull = rng.uniform(0.3, 0.9, size=(rows, 1)).astype(np.float32)
    out = base[rng.integers(0, len(base), rows)] * (1 - pull) + noise * pull
    return np.asarray(out / np.linalg.norm(out, axis=1, keepdims=True), dtype=np.float32)


def seed(
    session: Session, user_id: str, vectors: np.ndarray, model: str, *, deferred: bool = False
) -> None:
    for lo in range(0, len(vectors), SEED_CHUNK):
        chunk = vectors[lo : lo + SEED_CHUNK]
        rows = [
            {"tenant": TENANT, "user_id": user_id, "kind": "fact",
             "content": f"seeded memory {user_id} {lo + i}",
             "content_hash": f"{user_id}-{deferred}-{lo + i}", "embedding": v,
             "embedding_model": model, "ann_deferred": deferred}
            for i, v in enumerate(chunk)
        ]  # fmt: skip
        session.execute(insert(Memory), rows)
        print(f"  seeded {lo + len(chunk):,}/{len(vectors):,} for {user_id}", flush=True)


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


def neighbour_ids(
    sessions: Any, cands: list[Candidate], vectors: Any, model: str, *, exact: bool
) -> list[list[Neighbour]]:
    with sessions() as session:
        return fetch_neighbours(
            session, cands, vectors, embedding_model=model, k=ReconcilePolicy().neighbours,
            ann={} if exact else None,
        )  # fmt: skip


def recall(got: list[list[Neighbour]], truth: list[list[Neighbour]]) -> tuple[float, float]:
    """Mean recall@k of `got` against `truth`, and how often their nearest agree."""
    at_k = [
        len({n.id for n in g} & {n.id for n in t}) / len(t)
        for g, t in zip(got, truth, strict=True)
        if t
    ]
    nearest = [
        bool(g) and max(g, key=lambda n: n.similarity).id == max(t, key=lambda n: n.similarity).id
        for g, t in zip(got, truth, strict=True)
        if t
    ]
    return float(np.mean(at_k)), float(np.mean(nearest))


def store_vectors(embedder: Embedder, rows: list[int]) -> list[np.ndarray]:
    texts = memory_texts()
    print(f"  embedding {len(texts):,} LoCoMo memory texts for the stores' clusters", flush=True)
    base = embedder.embed(texts)
    return [clustered_vectors(base, n, seed=i) for i, n in enumerate(rows)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=500)
    parser.add_argument("--large", type=int, default=50_000)
    parser.add_argument("--tail", type=int, default=500,
                        help="the large user's rows not folded into its index yet")  # fmt: skip
    parser.add_argument("--batch", type=int, default=64, help="candidates per batch")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--exact-repeat", type=int, default=3,
                        help="runs for the large user before its index (slow)")  # fmt: skip
    args = parser.parse_args()
    print(f"host: {describe_host()}")
    embedder = build_embedder(Settings(embedding_provider="local"))
    model, dims = embedder.model_name, embedder.dimensions
    small_vecs, large_vecs, tail_vecs = store_vectors(embedder, [args.small, args.large, args.tail])
    small_user, large_user = f"small-{args.small}", f"large-{args.large}"
    with postgres_only() as stack:
        engine = make_engine(stack.database_url, pool_size=2)
        sessions = make_sessionmaker(engine)
        with sessions.begin() as session:
            seed(session, small_user, small_vecs, model)
            seed(session, large_user, large_vecs, model)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("ANALYZE memories"))
        batches = {}
        for user_id in (small_user, large_user):
            cands = batch_for(user_id, args.batch)
            batches[user_id] = (cands, embedder.embed([c.content for c in cands]))
        results: dict[str, list[float]] = {}

        def measure(label: str, user_id: str, repeat: int) -> None:
            cands, vectors = batches[user_id]
            time_user(sessions, user_id, cands, vectors, model, 1)  # warm-up
            results[label] = time_user(sessions, user_id, cands, vectors, model, repeat)
            print(f"  {label}: {statistics.median(results[label]):.1f} ms", flush=True)

        measure("small", small_user, args.repeat)
        measure("large, exact", large_user, args.exact_repeat)
        # The same large user once the maintenance job has given it its ANN index.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            t0 = time.perf_counter()
            build_user_index(
                conn, tenant=TENANT, user_id=large_user, model=model, dims=dims, rows=args.large
            )
            print(f"  built {large_user}'s ANN index in {time.perf_counter() - t0:.1f} s")
        measure("large, ANN, empty tail", large_user, args.repeat)
        with sessions.begin() as session:
            seed(session, large_user, tail_vecs, model, deferred=True)
        measure(f"large, ANN, tail of {args.tail:,}", large_user, args.repeat)
        cands, vectors = batches[large_user]
        truth = neighbour_ids(sessions, cands, vectors, model, exact=True)
        at_k, nearest = recall(neighbour_ids(sessions, cands, vectors, model, exact=False), truth)
        engine.dispose()
    small = statistics.median(results["small"])
    print(f"\nreconcile one batch of {args.batch} memory texts (median of {args.repeat} "
          f"runs, {args.exact_repeat} for the exact large user; "
          "a loaded host: compare within this run only)")  # fmt: skip
    print("| user's live memories | search | reconcile ms (median) | min | max | vs small |")
    print("|---|---|---|---|---|---|")
    for label, r in results.items():
        rows = args.small if label == "small" else args.large
        how = label.split(", ", 1)[1] if ", " in label else "exact"
        med = statistics.median(r)
        print(f"| {rows:,} | {how} | {med:.1f} | {min(r):.1f} | {max(r):.1f} "
              f"| {med / small:.2f}x |")  # fmt: skip
    print(f"\nneighbours through the index (ef_search {ANN_EF_SEARCH}, tail of {args.tail:,}) "
          f"against the exact scan: recall@{ReconcilePolicy().neighbours} {at_k:.3f}, "
          f"same nearest {nearest:.3f}")  # fmt: skip
    ratio = statistics.median(results[f"large, ANN, tail of {args.tail:,}"]) / small
    verdict = "met" if ratio <= GOAL_RATIO else "NOT met"
    print(
        f"\n{args.large:,} (ANN, tail of {args.tail:,}) vs {args.small:,}: {ratio:.2f}x "
        f"(goal <= {GOAL_RATIO}x: {verdict})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
