"""The systems' searches, interleaved, each timed on its own: wall and CPU per search.

Every question is asked of every system in turn, the order rotating by one system per
question (no system always goes first, after another's cache traffic), one search at
a time. A search's wall time and this process's CPU time (the client's side: the query
embedding, the driver, the store's code) are taken around the call alone; scoring runs
outside it. The Postgres side is each system's own server, whose process tree (the
backend included) is sampled before and after the whole pass: its CPU seconds over the
searches are that system's, since nothing else uses that server meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg

from bench.evals.locomo import Scores
from bench.harness.common import percentile
from bench.harness.host import tree_cpu_s
from bench.harness.locomo_data import Conversation, Question
from bench.harness.progress import progress
from bench.peers.systems import System
from memwell.db.driver import libpq_url

Ask = tuple[Conversation, Question]


@dataclass
class Pass:
    """One system's searches."""

    scores: Scores = field(default_factory=Scores)
    wall_ms: list[float] = field(default_factory=list)
    client_cpu_ms: list[float] = field(default_factory=list)
    #: searches that returned fewer than 10 hits
    short: int = 0
    postgres_cpu_s: float = 0.0

    @property
    def searches(self) -> int:
        return len(self.wall_ms)

    def p(self, q: float) -> float:
        return percentile(self.wall_ms, q)

    @property
    def client_cpu_per_search_ms(self) -> float:
        return sum(self.client_cpu_ms) / max(self.searches, 1)

    @property
    def postgres_cpu_per_search_ms(self) -> float:
        return self.postgres_cpu_s * 1000 / max(self.searches, 1)

    @property
    def cpu_per_search_ms(self) -> float:
        return self.client_cpu_per_search_ms + self.postgres_cpu_per_search_ms


def settle(database_url: str) -> None:
    """What a running service's tables look like: statistics gathered and the load's
    dirty pages written, so neither autovacuum nor the checkpointer runs mid-pass."""
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")


def asks_of(conversations: Sequence[Conversation], per_conversation: int | None) -> list[Ask]:
    """The questions, conversations taken in turn (one of each, then the next of each),
    at most `per_conversation` of each."""
    lists = [[(c, q) for q in c.questions[:per_conversation]] for c in conversations]
    depth = max((len(x) for x in lists), default=0)
    return [x[i] for i in range(depth) for x in lists if i < len(x)]


async def interleaved(systems: Sequence[System], asks: Sequence[Ask], warmup: int) -> list[Pass]:
    """Each ask of each system, rotating the order; `warmup` asks first, not counted.
    Returns one Pass per system, in the order given."""
    for conv, q in asks[:warmup]:
        for system in systems:
            await system.search(conv, q)
    passes = [Pass() for _ in systems]
    before = [tree_cpu_s([s.postgres_pid]) for s in systems]
    n = len(systems)
    shown = progress("searched questions", len(asks))
    for i, (conv, q) in enumerate(asks):
        for j in range(n):
            k = (i + j) % n
            system, done = systems[k], passes[k]
            c0, t0 = time.process_time(), time.perf_counter()
            hits = await system.search(conv, q)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            done.wall_ms.append(wall * 1000)
            done.client_cpu_ms.append(cpu * 1000)
            done.short += len(hits) < 10
            system.score(conv, q, hits, done.scores)
        shown.update(i + 1)
    shown.close()
    for system, done, cpu in zip(systems, passes, before, strict=True):
        done.postgres_cpu_s = tree_cpu_s([system.postgres_pid]) - cpu
    return passes
