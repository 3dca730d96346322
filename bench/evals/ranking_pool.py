"""Where each question's evidence ranks, and what re-ranking the store's top 50 reaches.

    python -m bench.evals.ranking_pool [--recorded] [--conversations 5] [--sessions 0] \
        [--pool 50]

The slice is ingested as `bench.evals.llm_modes` ingests it, once per mode (local mode,
and with `--recorded` hybrid mode on the recorded model), each on a throwaway stack of
its own, sessions closed as beat would close them. Then every question asks the service's
own `retrieve` for its top `--pool`, and two tables come out per mode:

- where the evidence ranks, by category: the evidence turns first covered by a hit in
  the top 10, at ranks 11-20, lower in the pool, or by no hit of the pool. What is in
  the pool is what a re-ranking of it can reach.
- the same pool re-ranked by each lever below, its top 10 scored as `llm_modes` scores
  a mode (R@10 per category, R@10 with one evidence turn per hit, answer containment,
  tokens of the top 10), beside the service's own order in the same run.

The levers are what a ranking change could do without a new kind of memory: a hit
whose turns earlier hits already cover gives its place to the next; a question naming
one of the conversation's speakers ranks that speaker's own memories first (the other
speaker's a margin lower); session summaries a margin higher; and the first two
together. Each moves a score the service computed, so each is exactly what that change
to the statement would return from this pool.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from bench.evals.llm_modes import (
    TENANT,
    ingested,
    print_recall,
    recorded_endpoint,
    slice_conversations,
)
from bench.evals.locomo import Scores, add_hits
from bench.harness.host import describe_host
from bench.harness.locomo_data import CATEGORIES, Conversation, Question, load
from bench.harness.progress import progress
from bench.harness.stack import LOCOMO_DEFAULT
from memwell.core.settings import get_settings
from memwell.pipeline.extract import speaker_name
from memwell.retrieval.search import MemoryHit
from memwell.retrieval.service import build_retrieval, retrieve

#: Bands of ranks by name and last rank; the rest of the pool and what is not in it follow.
BANDS = (("top 10", 10), ("11-20", 20))
SPEAKER_MARGIN = 0.1
SUMMARY_MARGIN = 0.06


@dataclass(frozen=True)
class Asked:
    """One question and the service's top hits for it, best first."""

    conversation: Conversation
    question: Question
    hits: list[MemoryHit]


Rerank = Callable[[Asked], list[MemoryHit]]


def evidence_bands(asked: Sequence[Asked], pool: int) -> dict[int, list[int]]:
    """Per category, how many evidence turns a hit first covers in each band of ranks:
    the top 10, 11-20, the rest of the pool, and none of the pool."""
    bands: dict[int, list[int]] = {}
    for a in asked:
        counts = bands.setdefault(a.question.category, [0] * (len(BANDS) + 2))
        prefix = f"{a.conversation.sample_id}:"
        ranks = [{s.removeprefix(prefix) for s in h.source_turn_ids} for h in a.hits[:pool]]
        for turn in a.question.evidence:
            first = next((i + 1 for i, turns in enumerate(ranks) if turn in turns), None)
            counts[_band(first)] += 1
    return bands


def _band(rank: int | None) -> int:
    """The band a first rank falls in; None (not in the pool) is the last."""
    if rank is None:
        return len(BANDS) + 1
    return next((b for b, (_, last) in enumerate(BANDS) if rank <= last), len(BANDS))


def service_order(asked: Asked) -> list[MemoryHit]:
    return list(asked.hits)


def one_hit_per_turn(hits: Sequence[MemoryHit]) -> list[MemoryHit]:
    """A hit whose source turns earlier hits all cover goes after every other hit."""
    fresh: list[MemoryHit] = []
    covered_again: list[MemoryHit] = []
    covered: set[str] = set()
    for hit in hits:
        turns = set(hit.source_turn_ids)
        (covered_again if turns and turns <= covered else fresh).append(hit)
        covered |= turns
    return fresh + covered_again


def named_speaker(conversation: Conversation, question: Question) -> str | None:
    """The one speaker of the conversation the question names, if it names exactly one."""
    speakers = {speaker_name(t.role, dict(t.metadata)) for t in conversation.turns}
    named = {s for s in speakers if s and re.search(rf"\b{re.escape(s)}\b", question.text)}
    return named.pop() if len(named) == 1 else None


def shifted(hits: Sequence[MemoryHit], shift: Callable[[MemoryHit], float]) -> list[MemoryHit]:
    """The hits by their score plus `shift`, best first (ties keep the service's order)."""
    return sorted(hits, key=lambda h: h.score + shift(h), reverse=True)


def speaker_first(asked: Asked, margin: float = SPEAKER_MARGIN) -> list[MemoryHit]:
    """A question naming one speaker: the other speakers' memories `margin` lower."""
    named = named_speaker(asked.conversation, asked.question)
    if named is None:
        return list(asked.hits)

    def other(hit: MemoryHit) -> float:
        said_by = hit.metadata.get("speaker")
        return -margin if said_by and said_by != named else 0.0

    return shifted(asked.hits, other)


def summaries_ahead(asked: Asked, margin: float = SUMMARY_MARGIN) -> list[MemoryHit]:
    return shifted(asked.hits, lambda h: margin if h.kind == "summary" else 0.0)


LEVERS: dict[str, Rerank] = {
    "service's order": service_order,
    "one hit per source turn": lambda a: one_hit_per_turn(a.hits),
    f"named speaker first (others -{SPEAKER_MARGIN})": speaker_first,
    f"summaries +{SUMMARY_MARGIN}": summaries_ahead,
    "named speaker first, one hit per turn": lambda a: one_hit_per_turn(speaker_first(a)),
}


def ask_all(conversations: list[Conversation], database_url: str, pool: int) -> list[Asked]:
    """Every question's top `pool` through the service's `retrieve`, as the evals ask."""
    return asyncio.run(_ask_all(conversations, database_url, pool))


async def _ask_all(conversations: list[Conversation], database_url: str, pool: int) -> list[Asked]:
    deps = build_retrieval(get_settings(), database_url=database_url, access=None)
    asked = []
    try:
        with progress("questions", sum(len(c.questions) for c in conversations)) as bar:
            for conv in conversations:
                for q in conv.questions:
                    hits = await retrieve(
                        deps, tenant=TENANT, user_id=conv.sample_id, query=q.text, k=pool,
                        as_of=conv.last_date,
                    )  # fmt: skip
                    asked.append(Asked(conv, q, hits))
                    bar.update(len(asked))
    finally:
        await deps.reads.close()
    return asked


def scored(asked: Sequence[Asked], rerank: Rerank) -> Scores:
    scores = Scores()
    for a in asked:
        add_hits(scores, a.conversation, a.question, rerank(a)[:10])
    return scores


def print_mode(label: str, asked: Sequence[Asked], pool: int) -> None:
    cats = list(CATEGORIES)
    bands = evidence_bands(asked, pool)
    heads = [name for name, _ in BANDS] + [f"{BANDS[-1][1] + 1}-{pool}", f"not in top {pool}"]
    print(f"\n{label}: where the evidence turns first rank\n")
    print("| category | evidence turns | " + " | ".join(heads) + " |")
    print("|---" * (len(heads) + 2) + "|")
    for c in cats:
        counts = bands.get(c, [0] * len(heads))
        print(f"| {CATEGORIES[c]} | {sum(counts)} | " + " | ".join(map(str, counts)) + " |")
    print(f"\n{label}: the top {pool} re-ranked, scored at 10")
    print_recall("lever", [(name, scored(asked, rerank)) for name, rerank in LEVERS.items()])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=LOCOMO_DEFAULT, help="LoCoMo-format JSON")
    parser.add_argument("--conversations", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=0, help="0: whole conversations")
    parser.add_argument("--pool", type=int, default=50, help="hits per question")
    parser.add_argument(
        "--recorded", action="store_true", help="hybrid mode on the recorded model too"
    )
    args = parser.parse_args(argv)
    data: Path = args.data
    if not data.exists():
        print(f"skipped: LoCoMo data not found at {data} (pass --data PATH)")
        return 0
    if args.pool < 20:
        parser.error("--pool must be 20 or more")
    conversations = slice_conversations(
        load(data), count=args.conversations, sessions=args.sessions
    )
    questions = sum(len(c.questions) for c in conversations)
    print(f"LoCoMo slice: {len(conversations)} conversation(s), {questions} questions, "
          f"top {args.pool} each")  # fmt: skip
    print(describe_host())
    modes = [("local", "local")] + ([("hybrid recorded", "hybrid")] if args.recorded else [])
    for label, mode in modes:
        print(f"==> {label}", file=sys.stderr)
        endpoint = recorded_endpoint(data) if mode != "local" else nullcontext(None)
        with endpoint as env, ingested(conversations, mode=mode, endpoint=env) as (stack, _):
            asked = ask_all(conversations, stack.database_url, args.pool)
        print_mode(label, asked, args.pool)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
