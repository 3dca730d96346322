"""Memwell beside its peers on LoCoMo: the same conversations, questions and embeddings.

    python -m bench.peers [--data PATH] [--conversations N] [--questions N]
                          [--peers langgraph-hnsw,langgraph-flat,mem0]

The peers are optional installs: `pip install -e ".[peers]"`. A peer whose package is
missing, or that cannot run here, is left out with a line saying why. See
docs/evaluation.md ("Beside the peers") for what each system stores and how it is
measured.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from bench.evals.locomo import turn_document
from bench.harness.host import describe_host
from bench.harness.locomo_store import LocomoStore, locomo_store
from bench.harness.stack import LOCOMO_DEFAULT, bare_postgres
from bench.peers.measure import asks_of, interleaved, settle
from bench.peers.memwell_side import memwell_system
from bench.peers.report import print_report
from bench.peers.systems import System
from bench.peers.vectors import VectorBook
from memwell.core.settings import get_settings

PEERS = ("langgraph-hnsw", "langgraph-flat", "mem0")
#: the same for every server: the LoCoMo store fits many times over
SHARED_BUFFERS_MB = 256


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=LOCOMO_DEFAULT, help="LoCoMo-format JSON")
    p.add_argument("--conversations", type=int, default=None, help="only the first N")
    p.add_argument("--questions", type=int, default=None, help="at most N per conversation")
    p.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated, of {PEERS}")
    p.add_argument("--warmup", type=int, default=20, help="questions asked first, not counted")
    p.add_argument("--shared-buffers-mb", type=int, default=SHARED_BUFFERS_MB)
    return p


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def _peer(
    name: str, stack_root: ExitStack, store: LocomoStore, book: VectorBook, buffers: int
) -> System | None:
    """Start one peer on a Postgres of its own, holding every turn; None when it cannot
    run here (the reason printed)."""
    if name.startswith("langgraph-"):
        try:
            from bench.peers.langgraph_peer import langgraph_system
        except ImportError as exc:
            print(f"{name}: left out ({exc}); pip install -e '.[peers]'", file=sys.stderr)
            return None
        stack = stack_root.enter_context(bare_postgres(shared_buffers_mb=buffers))
        print(f"ingesting into {name}", file=sys.stderr)
        system = langgraph_system(
            stack, "hnsw" if name == "langgraph-hnsw" else "flat", book, store.conversations
        )
        return stack_root.enter_context(system)
    if name == "mem0":
        from bench.peers.mem0_peer import mem0_system

        if importlib.util.find_spec("mem0") is None:
            print(f"{name}: left out (mem0ai is not installed); pip install -e '.[peers]'",
                  file=sys.stderr)  # fmt: skip
            return None
        print(f"ingesting into {name}", file=sys.stderr)
        return mem0_system(stack_root, book, store.conversations, buffers)
    raise ValueError(f"unknown peer {name!r}")


async def _measure(
    store: LocomoStore, peers: Sequence[System], questions: int | None, warmup: int
) -> None:
    async with memwell_system(store, get_settings()) as memwell:
        systems: list[System] = [memwell, *peers]
        asks = asks_of(store.conversations, questions)
        print(f"asking {len(asks)} questions of {len(systems)} systems, interleaved",
              file=sys.stderr)  # fmt: skip
        passes = await interleaved(systems, asks, warmup)
    print(f"\nLoCoMo {len(store.conversations)} conversations, {len(asks)} questions, "
          "R@10 and search cost, one search at a time (query embedding included)")  # fmt: skip
    print_report(systems, passes, against=1 if peers else 0)


def main(argv: Sequence[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    if not a.data.exists():
        print(f"skipped: LoCoMo data not found at {a.data} (pass --data PATH)")
        return 0
    names = [n.strip() for n in a.peers.split(",") if n.strip()]
    if unknown := set(names) - set(PEERS):
        _parser().error(f"unknown peers {sorted(unknown)}; choose from {list(PEERS)}")
    print(f"host: {describe_host()}")
    print(_load())
    with ExitStack() as stacks:
        store = stacks.enter_context(
            locomo_store(a.data, conversations=a.conversations,
                         shared_buffers_mb=a.shared_buffers_mb)
        )  # fmt: skip
        book = VectorBook(get_settings())
        book.add([turn_document(t) for c in store.conversations for t in c.turns])
        peers = [p for n in names if (p := _peer(n, stacks, store, book, a.shared_buffers_mb))]
        for system in (store.stack.database_url, *(p.database_url for p in peers)):
            settle(system)
        asyncio.run(_measure(store, peers, a.questions, a.warmup))
    print(_load())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
