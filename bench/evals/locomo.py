"""LoCoMo retrieval evaluation through the real pipeline, beside a BM25 baseline.

    python -m bench.evals.locomo [--data PATH] [--configs default,rrf,vector]

Starts a throwaway embedded Postgres + Valkey and a real Celery worker subprocess,
enqueues every turn that `memwell import --format locomo` would (one user per
conversation, one session per LoCoMo session, event time = the session's date, turn
id = "{sample_id}:{dia_id}") with `memwell.enqueue_turns`, waits until the worker
has consolidated them, then asks every question as that user `as_of` the last
session's date through the same retrieval function the API uses. Prints R@5, R@10,
MRR and the mean tokens of the top 10 per category and overall, the search latency
(query embedding included), and BM25 over raw turns.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy import text

from bench.harness.answer_metrics import containment, one_credit_recall
from bench.harness.bm25 import BM25
from bench.harness.locomo_data import CATEGORIES, Conversation, Question, dia_id, load
from bench.harness.progress import progress
from bench.harness.stack import LOCOMO_DEFAULT, full_stack, percentile
from memwell.core.settings import get_settings
from memwell.core.tokens import count_tokens
from memwell.db.engine import make_engine
from memwell.intake.enqueue import enqueue_turns
from memwell.intake.turns import TurnIn
from memwell.local.waiting import wait_for
from memwell.retrieval.search import MemoryHit, Overrides
from memwell.retrieval.service import build_retrieval, retrieve

TENANT = "locomo"
CONFIGS: dict[str, Overrides] = {
    # "default" is the shipped settings; the others vary one thing from them.
    "default": Overrides(),
    "rrf": Overrides(fusion="rrf"),
    "vector": Overrides(fusion="vector"),
    "text-weight-0.3": Overrides(text_weight=0.3),
    "no-recency": Overrides(w_recency=0.0),
    "recency-0.15-hl14d": Overrides(w_recency=0.15, half_life_h=24 * 14),
    "recency-hl30d": Overrides(half_life_h=24 * 30),
    "importance-0.15": Overrides(w_importance=0.15),
    "relevance-only": Overrides(w_recency=0.0, w_importance=0.0),
    "floor-0": Overrides(similarity_floor=0.0),
    # The statement without the entity term (the same store, the entity lookups skipped).
    "entities-off": Overrides(entity_weight=0.0),
    "entity-weight-0.3": Overrides(entity_weight=0.3),
    "entities-text-weight-0.3": Overrides(text_weight=0.3),
}


@dataclass(frozen=True)
class QuestionScore:
    r5: float
    r10: float
    #: R@10 where each hit credits at most one evidence turn
    r10_one: float
    rr: float
    tokens: int
    #: None when the gold answer has no content words (adversarial questions)
    containment: float | None


@dataclass(frozen=True)
class Summary:
    n: int
    r5: float
    r10: float
    r10_one: float
    mrr: float
    tokens: float
    #: None when no question of these categories has a gold answer to look for
    containment: float | None


@dataclass
class Scores:
    """Per-question results of one retriever, grouped by category."""

    rows: dict[int, list[QuestionScore]] = field(default_factory=lambda: defaultdict(list))
    latencies_ms: list[float] = field(default_factory=list)

    def add(
        self, q: Question, ranked: Sequence[set[str]], texts: Sequence[str], tokens: int
    ) -> None:
        def recall(k: int) -> float:
            covered = set().union(*ranked[:k]) if ranked[:k] else set()
            return len(q.evidence & covered) / len(q.evidence)

        rr = next((1 / (i + 1) for i, turns in enumerate(ranked) if turns & q.evidence), 0.0)
        self.rows[q.category].append(
            QuestionScore(
                r5=recall(5),
                r10=recall(10),
                r10_one=one_credit_recall(q.evidence, ranked, 10),
                rr=rr,
                tokens=tokens,
                containment=containment(q.answer, texts[:10]),
            )
        )

    def summary(self, categories: Sequence[int]) -> Summary:
        rows = [r for c in categories for r in self.rows.get(c, [])]
        n = max(len(rows), 1)
        judged = [r.containment for r in rows if r.containment is not None]
        return Summary(
            n=len(rows),
            r5=sum(r.r5 for r in rows) / n,
            r10=sum(r.r10 for r in rows) / n,
            r10_one=sum(r.r10_one for r in rows) / n,
            mrr=sum(r.rr for r in rows) / n,
            tokens=sum(r.tokens for r in rows) / n,
            containment=sum(judged) / len(judged) if judged else None,
        )


def ingest(conversations: list[Conversation], database_url: str, redis_url: str) -> float:
    """Enqueue every turn through the public client; wait for the worker. Returns seconds."""
    started = time.perf_counter()
    total = 0
    for conv in conversations:
        turns = conv.turns
        # Chunks no larger than the embed batch (64): a consolidate task takes at most
        # one batch, and turns left over would wait for the sweeper.
        enqueue_turns(turns, tenant=TENANT, broker_url=redis_url, chunk_size=50)
        total += len(turns)
    engine = make_engine(database_url, pool_size=1)
    ids = [t.id for conv in conversations for t in conv.turns]
    with progress("consolidated turns", total) as bar:

        def consolidated() -> bool:
            with engine.connect() as conn:
                done = conn.execute(
                    text(
                        "SELECT count(*) FROM turns WHERE tenant = :t AND status = 'processed'"
                        " AND id = ANY(:ids)"
                    ),
                    {"t": TENANT, "ids": ids},
                ).scalar_one()
            bar.update(done)
            return bool(done >= total)

        try:
            # A stuck worker fails the run instead of holding it forever: a minute, plus
            # a second a turn (a 2-core host consolidates about 20 turns a second).
            wait_for(consolidated, timeout=60 + total, interval=0.5, what="the worker")
        finally:
            engine.dispose()
    return time.perf_counter() - started


def evaluate_memwell(
    conversations: list[Conversation], database_url: str, configs: list[str]
) -> dict[str, Scores]:
    """Every question through the service's own `retrieve`, as REST and MCP ask it."""
    return asyncio.run(_evaluate_memwell(conversations, database_url, configs))


async def _evaluate_memwell(
    conversations: list[Conversation], database_url: str, configs: list[str]
) -> dict[str, Scores]:
    deps = build_retrieval(get_settings(), database_url=database_url, access=None)
    results = {name: Scores() for name in configs}
    try:
        for conv in conversations:
            for q in conv.questions:
                for name in configs:
                    t0 = time.perf_counter()
                    hits = await retrieve(
                        deps, tenant=TENANT, user_id=conv.sample_id, query=q.text, k=10,
                        as_of=conv.last_date, overrides=CONFIGS[name],
                    )  # fmt: skip
                    results[name].latencies_ms.append((time.perf_counter() - t0) * 1000)
                    add_hits(results[name], conv, q, hits)
    finally:
        await deps.reads.close()
    return results


def add_hits(scores: Scores, conv: Conversation, q: Question, hits: Sequence[MemoryHit]) -> None:
    """Score Memwell's hits for one question: the turns each covers (its provenance),
    its text as the model reads it, the tokens of its content."""
    prefix = f"{conv.sample_id}:"
    ranked = [{s.removeprefix(prefix) for s in h.source_turn_ids} for h in hits]
    tokens = sum(count_tokens(h.content) for h in hits)
    scores.add(q, ranked, [hit_text(h) for h in hits], tokens)


def add_turns(scores: Scores, q: Question, ids: Sequence[str], texts: Sequence[str]) -> None:
    """Score a retriever of raw turns for one question: each hit covers its own turn
    (`ids`, LoCoMo dia ids) and reads as its document (`texts`)."""
    scores.add(q, [{i} for i in ids], texts, sum(count_tokens(t) for t in texts))


def _date_words(when: datetime) -> str:
    """A date as LoCoMo's answers write one: "7 May 2023" (no zero padding)."""
    return f"{when.day} {when:%B %Y}"


def hit_text(hit: MemoryHit) -> str:
    """A memory as the model reads it: its text and its date (the context block dates
    every memory), the date in words as the BM25 documents carry it."""
    return f"({_date_words(hit.created_at)}) {hit.content}"


def turn_document(turn: TurnIn) -> str:
    """A raw turn as the baseline sees it: date, speaker, text and image caption."""
    assert turn.created_at is not None
    caption = turn.metadata.get("image_caption")
    suffix = f" [image: {caption}]" if caption else ""
    return f"({_date_words(turn.created_at)}) {turn.content}{suffix}"


def evaluate_bm25(conversations: list[Conversation]) -> Scores:
    scores = Scores()
    for conv in conversations:
        docs = [turn_document(t) for t in conv.turns]
        index = BM25(docs)
        for q in conv.questions:
            t0 = time.perf_counter()
            top = index.top(q.text, 10)
            scores.latencies_ms.append((time.perf_counter() - t0) * 1000)
            add_turns(scores, q, [dia_id(conv.turns[i]) for i in top], [docs[i] for i in top])
    return scores


_HEAD = f"{'n':>5}{'R@5':>8}{'R@10':>8}{'R@10/1':>8}{'MRR':>8}{'contain':>9}{'tok@10':>9}"


def _optional(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _cells(m: Summary) -> str:
    return (
        f"{m.n:>5}{m.r5:>8.3f}{m.r10:>8.3f}{m.r10_one:>8.3f}{m.mrr:>8.3f}"
        f"{_optional(m.containment):>9}{m.tokens:>9.1f}"
    )


def _table(title: str, rows: list[tuple[str, Scores]], categories: Sequence[int]) -> None:
    print(f"\n{title}")
    print(f"{'retriever':<26}{_HEAD}{'p50 ms':>9}{'p95 ms':>9}")
    for name, s in rows:
        lat = s.latencies_ms or [0.0]
        print(f"{name:<26}{_cells(s.summary(categories))}"
              f"{percentile(lat, 50):>9.2f}{percentile(lat, 95):>9.2f}")  # fmt: skip


def _per_category(name: str, s: Scores) -> None:
    print(f"\nper category: {name}")
    print(f"{'category':<22}{_HEAD}")
    groups: list[tuple[str, Sequence[int]]] = [
        (f"{c} {label}", [c]) for c, label in CATEGORIES.items()
    ]
    groups += [("1-4", [1, 2, 3, 4]), ("all", list(CATEGORIES))]
    for label, cats in groups:
        print(f"{label:<22}{_cells(s.summary(cats))}")


def _print_goals(memwell: Scores, bm25: Scores) -> None:
    everything = list(CATEGORIES)
    got, base = memwell.summary(everything), bm25.summary(everything)
    by_cat = {c: memwell.summary([c]).r10 for c in CATEGORIES}
    tok_ratio = got.tokens / max(base.tokens, 1e-9)
    print("\ngoals (all categories):")
    print(f"  R@10 >= 0.78: {got.r10:.3f}; multi-hop >= 0.60: {by_cat[1]:.3f}; "
          f"open-domain >= 0.55: {by_cat[3]:.3f}")  # fmt: skip
    print(f"  answer containment >= 0.72: {_optional(got.containment)} "
          f"(BM25 {_optional(base.containment)})")  # fmt: skip
    print(f"  tokens of the top 10 <= 1.0 x ten raw turns ({base.tokens:.1f}): "
          f"{got.tokens:.1f} = {tok_ratio:.2f}x")  # fmt: skip


def compare_models(conversations: list[Conversation], models: list[str]) -> int:
    """The default configuration once per local model, in one run, side by side."""
    import os

    n_turns = sum(len(c.turns) for c in conversations)
    summaries: dict[str, tuple[Scores, float]] = {}
    for model in models:
        os.environ["MEMWELL_LOCAL_MODEL"] = model
        get_settings.cache_clear()
        with full_stack() as stack:
            assert stack.redis_url is not None
            seconds = ingest(conversations, stack.database_url, stack.redis_url)
            results = evaluate_memwell(conversations, stack.database_url, ["default"])
        summaries[model] = (results["default"], n_turns / seconds)
        print(f"{model}: ingested in {seconds:.1f} s ({n_turns / seconds:.1f} turns/s)")
    cats = list(CATEGORIES)
    tail = " | containment | tokens of top 10 | consolidation turns/s | search p95 ms |"
    print("\n| model | R@10 | " + " | ".join(CATEGORIES[c] for c in cats) + tail)
    print("|---" * (len(cats) + 6) + "|")
    for model, (scores, rate) in summaries.items():
        overall = scores.summary(cats)
        per = " | ".join(f"{scores.summary([c]).r10:.3f}" for c in cats)
        print(f"| {model} | {overall.r10:.3f} | {per} | {_optional(overall.containment)} | "
              f"{overall.tokens:.1f} | {rate:.1f} | "
              f"{percentile(scores.latencies_ms, 95):.1f} |")  # fmt: skip
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=LOCOMO_DEFAULT, help="LoCoMo-format JSON")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated")
    parser.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    parser.add_argument(
        "--models",
        default="",
        help="local models side by side, e.g. minilm,e5-small (each on a stack of its own, "
        "the shipped settings and that model's calibration)",
    )
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"skipped: LoCoMo data not found at {args.data} (pass --data PATH)")
        return 0
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = set(configs) - set(CONFIGS)
    if unknown:
        parser.error(f"unknown configs {sorted(unknown)}; choose from {list(CONFIGS)}")
    conversations = load(args.data)[: args.limit or None]
    n_turns = sum(len(c.turns) for c in conversations)
    n_q = sum(len(c.questions) for c in conversations)
    print(f"LoCoMo: {len(conversations)} conversations, {n_turns} turns, {n_q} questions")

    if args.models:
        return compare_models(conversations, [m.strip() for m in args.models.split(",") if m])
    bm25 = evaluate_bm25(conversations)
    with full_stack() as stack:
        assert stack.redis_url is not None
        seconds = ingest(conversations, stack.database_url, stack.redis_url)
        print(f"ingested through the real pipeline in {seconds:.1f} s "
              f"({n_turns / seconds:.0f} turns/s)")  # fmt: skip
        results = evaluate_memwell(conversations, stack.database_url, configs)
    rows = [(f"memwell: {name}", results[name]) for name in configs]
    rows.append(("BM25 raw turns+date+cap", bm25))
    _table("all categories", rows, list(CATEGORIES))
    _table("categories 1-4", rows, [1, 2, 3, 4])
    best: Callable[[str], float] = lambda name: results[name].summary(list(CATEGORIES)).r10  # noqa: E731
    winner = max(configs, key=best)
    _per_category(f"memwell: {winner} (best R@10)", results[winner])
    _per_category("BM25 baseline", bm25)
    judged = "default" if "default" in results else winner
    if judged != winner:
        _per_category("memwell: default (the shipped settings)", results[judged])
    _print_goals(results[judged], bm25)
    settings = get_settings()
    print(f"embedder: memories {settings.local_embedding_precision}, queries "
          f"{settings.local_query_precision}; judged: {judged}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
