"""What entity memory costs consolidation: the reconcile step (which writes memories and,
with entities on, their entities, links and relations) timed with entities off and on,
interleaved in one run, plus the local extractor alone and the embedder it shares the
worker with.

Run from the repo root: ``python -m bench.figures.entities [--turns N] [--rounds R]``.
Starts an embedded Postgres, turns LoCoMo dev turns into candidates as local mode does,
and reconciles them in batches of 64 into a fresh tenant per round, alternating off and
on, so load from other processes falls on both alike. Vectors are hashed unit vectors
(the write cost does not depend on them; the embedder's own cost is measured apart on
real sentences), so no round waits on the model.

The end-to-end figure (`bench.figures.pipeline`, run with `MEMWELL_ENTITIES_ENABLED`
false and true) is the one the goal names; on a shared host its noise is larger than
the effect, which is why this figure isolates the step entities add to.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from dataclasses import replace

import numpy as np
from sqlalchemy import text

from bench.figures.pipeline import pipeline_turns
from bench.harness.host import describe_host
from bench.harness.locomo_data import turn_view
from bench.harness.stack import postgres_only
from memwell.core.settings import Settings
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.embeddings import build_embedder
from memwell.entities.extract import extract
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.extract import extract_local
from memwell.pipeline.reconcile import ReconcilePolicy, reconcile_batch

BATCH = 64
DIM = 384


def _vector(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _candidates(turns: int) -> list[Candidate]:
    settings = Settings()
    return [
        c
        for t in pipeline_turns(turns)
        for c in extract_local(turn_view(t), threshold=settings.extract_threshold)
    ]


def _rounds(
    url: str, cands: list[Candidate], vectors: np.ndarray, rounds: int
) -> dict[bool, float]:
    """Seconds per mode: each batch is written with entities off, then on, into two
    tenants of the same round (so load from other processes falls on both alike); a
    batch's time is its fastest over the rounds, which is the least disturbed."""
    sessions = make_sessionmaker(make_engine(url, pool_size=1))
    batches = range(0, len(cands), BATCH)
    best: dict[bool, list[float]] = {False: [float("inf")] * len(batches), True: []}
    best[True] = list(best[False])
    for r in range(rounds):
        mine = {on: [replace(c, tenant=f"bench-{r}-{on}") for c in cands] for on in (False, True)}
        for j, i in enumerate(batches):
            for on in (False, True):
                started = time.perf_counter()
                with sessions.begin() as session:
                    reconcile_batch(
                        session,
                        mine[on][i : i + BATCH],
                        vectors[i : i + BATCH],
                        embedding_model="hashed",
                        policy=ReconcilePolicy(entities=on),
                    )
                best[on][j] = min(best[on][j], time.perf_counter() - started)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    return {on: sum(times) for on, times in best.items()}


def _written(url: str, tenant: str) -> dict[str, int]:
    engine = make_engine(url, pool_size=1)
    with engine.connect() as conn:
        return {
            table: int(
                conn.execute(
                    text(f"SELECT count(*) FROM {table} WHERE tenant = :t"), {"t": tenant}
                ).scalar_one()
            )
            for table in ("memories", "entities", "entity_aliases", "memory_entities",
                          "entity_relations")
        }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cands = _candidates(args.turns)
    texts = [c.content for c in cands]
    print(f"{args.turns} turns -> {len(cands)} candidates", file=sys.stderr)

    extract.cache_clear()
    started = time.process_time()  # CPU time: what the worker pays, whatever the load
    for memory in texts:
        extract(memory)
    extract_us = (time.process_time() - started) / len(texts) * 1e6

    embedder = build_embedder(Settings(embedding_provider="local"))
    sample = texts[: 4 * BATCH]
    embedder.embed(sample[:BATCH])  # warm-up
    started = time.perf_counter()
    for i in range(0, len(sample), BATCH):
        embedder.embed(sample[i : i + BATCH])
    embed_ms = (time.perf_counter() - started) / len(sample) * 1000

    vectors = np.stack([_vector(t) for t in texts])
    with postgres_only() as stack:
        seconds = _rounds(stack.database_url, cands, vectors, args.rounds)
        written = _written(stack.database_url, "bench-0-True")

    per_turn = {on: s / args.turns * 1000 for on, s in seconds.items()}
    embed_turn = embed_ms * len(cands) / args.turns
    added = per_turn[True] - per_turn[False]
    print(f"\nEntity memory's cost in consolidation ({describe_host()}; shared host)")
    print(f"{'what':<52}{'value':>10}")
    print(f"{'local extractor, CPU us per memory':<52}{extract_us:>10.0f}")
    print(f"{'embedder, ms per turn (batch 64, same run)':<52}{embed_turn:>10.2f}")
    print(f"{'reconcile, ms per turn, entities off':<52}{per_turn[False]:>10.2f}")
    print(f"{'reconcile, ms per turn, entities on':<52}{per_turn[True]:>10.2f}")
    print(f"{'added by entities, ms per turn':<52}{added:>10.2f}")
    share = added / (embed_turn + per_turn[True])
    print(f"{'share of a turn (embed + reconcile) it takes':<52}{share:>10.1%}")
    print("rows one 'on' round wrote: " + ", ".join(f"{t} {n}" for t, n in written.items()))
    print(f"each batch's fastest of {args.rounds} rounds; goal: throughput drop <= 15%")


if __name__ == "__main__":
    main()
