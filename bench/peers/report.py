"""The peer bench's table: one row per system, recall and cost side by side."""

from __future__ import annotations

from collections.abc import Sequence

from bench.harness.common import print_table
from bench.harness.locomo_data import CATEGORIES
from bench.peers.measure import Pass
from bench.peers.systems import System

_HEAD = [
    "system",
    "R@10",
    *(CATEGORIES[c] for c in CATEGORIES),
    "R@10/1",
    "tok@10",
    "ingest turns/s",
    "(w/o embed)",
    "p50 ms",
    "p95 ms",
    "CPU ms/search",
    "(client+pg)",
    "<10 hits",
]


def _r10(done: Pass, category: int) -> str:
    got = done.scores.summary([category])
    return f"{got.r10:.3f}" if got.n else "-"


def _row(system: System, done: Pass) -> list[object]:
    everything = done.scores.summary(list(CATEGORIES))
    per = [_r10(done, c) for c in CATEGORIES]
    ingest = system.ingested
    bare = ingest.rate_without_embedding
    return [
        system.name,
        f"{everything.r10:.3f}",
        *per,
        f"{everything.r10_one:.3f}",
        f"{everything.tokens:.0f}",
        f"{ingest.rate:.0f}",
        "-" if bare is None else f"{bare:.0f}",
        f"{done.p(50):.2f}",
        f"{done.p(95):.2f}",
        f"{done.cpu_per_search_ms:.2f}",
        f"{done.client_cpu_per_search_ms:.2f}+{done.postgres_cpu_per_search_ms:.2f}",
        f"{done.short}/{done.searches}",
    ]


def print_report(systems: Sequence[System], passes: Sequence[Pass], *, against: int) -> None:
    """The table, then each system's search cost as a ratio to `systems[against]`'s."""
    print_table(_HEAD, [_row(s, p) for s, p in zip(systems, passes, strict=True)])
    base, base_pass = systems[against], passes[against]
    print(f"\nsearch cost relative to {base.name} (same run):")
    for system, done in zip(systems, passes, strict=True):
        if system is base:
            continue
        print(
            f"  {system.name}: p50 {done.p(50) / base_pass.p(50):.2f}x, "
            f"p95 {done.p(95) / base_pass.p(95):.2f}x, "
            f"CPU per search {done.cpu_per_search_ms / base_pass.cpu_per_search_ms:.2f}x"
        )
