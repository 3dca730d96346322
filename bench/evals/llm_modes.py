"""Local mode against LLM mode (and the hybrid) on one LoCoMo slice, side by side.

    python -m bench.evals.llm_modes --gguf 0.5b=PATH [--gguf 1.5b=PATH] \
        [--modes local,llm,hybrid] [--conversations 1] [--sessions 6]

The slice is the first `--sessions` sessions of the first `--conversations` dev
conversations, and the questions whose evidence lies wholly inside it. Each mode gets
a throwaway stack of its own (embedded Postgres + Valkey, one real worker); the LLM
modes also get llama.cpp's server (`python -m llama_cpp.server`, the llm-local extra)
on the given GGUF, started here and stopped after the mode, with the arguments and the
client settings `memwell up --llm-gguf` uses, and a worker of one process on the llm
queue. Every turn is enqueued at once, as a user's import would, at shipped settings.

Per mode: R@10 per category, R@10 with one evidence turn per hit, answer containment,
tokens of the top 10, consolidation turns/s (enqueue to the last turn settled), model
calls and tokens per stored turn (from llm_usage), fallbacks by step and reason, dead
letters, and who wrote the memories (their provenance). Local mode is the baseline of
the same run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from sqlalchemy import text

from bench.evals.locomo import Scores, evaluate_memwell
from bench.harness.api_server import free_port
from bench.harness.host import describe_host
from bench.harness.locomo_data import CATEGORIES, Conversation, dia_id, load
from bench.harness.progress import progress
from bench.harness.stack import LOCOMO_DEFAULT, full_stack, stop_group
from memwell.core.settings import get_settings
from memwell.db.engine import make_engine
from memwell.intake.enqueue import enqueue_turns
from memwell.llm.model_server import probe_model_server
from memwell.local.llm_server import LocalLlmServer

TENANT = "locomo"
MODES = ("local", "llm", "hybrid")
SERVER_START_S = 300.0


@dataclass
class ModeResult:
    label: str
    scores: Scores
    turns: int
    seconds: float
    settled: dict[str, int]
    calls: int = 0
    #: calls whose answer could not be used (endpoint errors, timeouts, bad output)
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)
    dead_letters: int = 0
    writers: dict[str, int] = field(default_factory=dict)


def slice_conversations(
    conversations: list[Conversation], *, count: int, sessions: int
) -> list[Conversation]:
    """The first `sessions` sessions of the first `count` conversations, with only the
    questions answerable from them."""
    kept = []
    for conv in conversations[:count]:
        turns = [t for t in conv.turns if _session_number(dia_id(t)) <= sessions]
        ids = {dia_id(t) for t in turns}
        questions = [q for q in conv.questions if q.evidence <= ids]
        last = max(t.created_at for t in turns if t.created_at)
        kept.append(replace(conv, turns=turns, questions=questions, last_date=last))
    return kept


def _session_number(dia: str) -> int:
    return int(dia.split(":")[0].removeprefix("D"))


@contextmanager
def model_server(gguf: Path, *, threads: int, ctx: int, root: Path) -> Iterator[LocalLlmServer]:
    """llama.cpp's OpenAI-compatible server on a loopback port, started with the
    arguments `memwell up --llm-gguf` gives it."""
    server = replace(
        LocalLlmServer.from_settings(get_settings(), gguf),
        port=free_port(), alias="bench-model", n_threads=threads, n_ctx=ctx,
    )  # fmt: skip
    log = (root / f"llama-{server.port}.log").open("ab")
    proc = subprocess.Popen(server.argv(Path(sys.executable)), stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + SERVER_START_S
        while not probe_model_server(server.base_url).up:
            if proc.poll() is not None:
                raise RuntimeError(f"the model server exited; see {log.name}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the model server did not answer in {SERVER_START_S:.0f} s")
            time.sleep(0.5)
        yield server
    finally:
        stop_group(proc)
        log.close()


def ingest(conversations: list[Conversation], database_url: str, redis_url: str) -> float:
    """Enqueue every turn at once; wait until none is pending. Returns seconds."""
    started = time.perf_counter()
    total = sum(len(c.turns) for c in conversations)
    for conv in conversations:
        enqueue_turns(conv.turns, tenant=TENANT, broker_url=redis_url, chunk_size=50)
    engine = make_engine(database_url, pool_size=1)
    try:
        with progress("settled turns", total) as bar:
            while True:
                settled = _settled(engine)
                done = sum(n for status, n in settled.items() if status != "pending")
                bar.update(done)
                if done >= total:
                    break
                time.sleep(1.0)
    finally:
        engine.dispose()
    return time.perf_counter() - started


def _settled(engine: object) -> dict[str, int]:
    with engine.connect() as conn:  # type: ignore[attr-defined]
        rows = conn.execute(
            text("SELECT status, count(*) FROM turns WHERE tenant = :t GROUP BY status"),
            {"t": TENANT},
        ).all()
    return {str(status): int(n) for status, n in rows}


def collect(database_url: str, result: ModeResult) -> None:
    """Model usage, fallbacks, dead letters and provenance, read back from the store."""
    engine = make_engine(database_url, pool_size=1)
    try:
        result.settled = _settled(engine)
        with engine.connect() as conn:
            usage = conn.execute(
                text("SELECT coalesce(sum(calls),0), coalesce(sum(prompt_tokens),0), "
                     "coalesce(sum(completion_tokens),0), coalesce(sum(failures),0) "
                     "FROM llm_usage WHERE tenant = :t"),
                {"t": TENANT},
            ).one()  # fmt: skip
            (result.calls, result.prompt_tokens, result.completion_tokens, result.failures) = map(
                int, usage
            )
            result.fallbacks = _fallbacks(conn)
            result.dead_letters = int(
                conn.execute(text("SELECT count(*) FROM dead_letters")).scalar_one()
            )
            writers = conn.execute(
                text("SELECT coalesce(metadata->>'extractor','?') || "
                     "coalesce('/' || (metadata->>'fallback'), ''), count(*) FROM memories "
                     "WHERE tenant = :t AND deleted_at IS NULL GROUP BY 1"),
                {"t": TENANT},
            ).all()  # fmt: skip
            result.writers = {str(k): int(n) for k, n in writers}
    finally:
        engine.dispose()


def _fallbacks(conn: object) -> dict[str, int]:
    """Fallbacks by step and reason (llm_usage.fallback_reasons)."""
    rows = conn.execute(  # type: ignore[attr-defined]
        text(
            "SELECT u.stage || '/' || r.key, sum(r.value::int) FROM llm_usage u, "
            "jsonb_each_text(u.fallback_reasons) r WHERE u.tenant = :t GROUP BY 1"
        ),
        {"t": TENANT},
    ).all()
    return {str(k): int(n) for k, n in rows if int(n)}


def run_mode(
    conversations: list[Conversation],
    *,
    label: str,
    mode: str,
    server: LocalLlmServer | None,
) -> ModeResult:
    """One mode on a stack of its own: ingest the slice, ask its questions. With a
    model server, the workers run as `memwell up --llm-gguf` runs them: its settings
    for the clients, and the llm queue in a worker of one process of its own."""
    env = {"MEMWELL_PIPELINE_MODE": mode}
    if server is not None:
        env |= server.client_env(get_settings())
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    get_settings.cache_clear()
    try:
        with full_stack(extra_env=env, llm_worker=server is not None) as stack:
            assert stack.redis_url is not None
            seconds = ingest(conversations, stack.database_url, stack.redis_url)
            scores = evaluate_memwell(conversations, stack.database_url, ["default"])["default"]
            result = ModeResult(label, scores, sum(len(c.turns) for c in conversations),
                                seconds, {})  # fmt: skip
            collect(stack.database_url, result)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        get_settings.cache_clear()
    return result


def _fmt_map(values: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(values.items())) or "0"


def print_tables(results: Sequence[ModeResult], *, file: TextIO = sys.stdout) -> None:
    cats = list(CATEGORIES)
    print("\n| mode | R@10 | " + " | ".join(CATEGORIES[c] for c in cats)
          + " | R@10/1 | containment | tokens of top 10 |", file=file)  # fmt: skip
    print("|---" * (len(cats) + 5) + "|", file=file)
    for r in results:
        overall = r.scores.summary(cats)
        per = " | ".join(f"{r.scores.summary([c]).r10:.3f}" for c in cats)
        contain = "-" if overall.containment is None else f"{overall.containment:.3f}"
        print(f"| {r.label} | {overall.r10:.3f} | {per} | {overall.r10_one:.3f} | "
              f"{contain} | {overall.tokens:.1f} |", file=file)  # fmt: skip
    print(
        "\n| mode | turns | turns/s | model calls / turn | failed calls | prompt tok / turn | "
        "completion tok / turn | fallbacks | dead letters | settled | memories by writer |",
        file=file,
    )
    print("|---" * 11 + "|", file=file)
    for r in results:
        n = max(r.turns, 1)
        print(f"| {r.label} | {r.turns} | {r.turns / r.seconds:.2f} | {r.calls / n:.3f} | "
              f"{r.failures} | "
              f"{r.prompt_tokens / n:.1f} | {r.completion_tokens / n:.1f} | "
              f"{_fmt_map(r.fallbacks)} | {r.dead_letters} | {_fmt_map(r.settled)} | "
              f"{_fmt_map(r.writers)} |", file=file)  # fmt: skip


def _models(values: Sequence[str]) -> dict[str, Path]:
    models = {}
    for value in values:
        label, _, path = value.partition("=")
        if not path:
            raise SystemExit(f"--gguf takes LABEL=PATH, got {value!r}")
        models[label] = Path(path)
    return models


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=LOCOMO_DEFAULT, help="LoCoMo-format JSON")
    parser.add_argument("--gguf", action="append", default=[], help="LABEL=PATH, repeatable")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated")
    parser.add_argument("--conversations", type=int, default=1)
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--ctx", type=int, default=4096)
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"skipped: LoCoMo data not found at {args.data} (pass --data PATH)")
        return 0
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown modes {sorted(unknown)}; choose from {list(MODES)}")
    models = _models(args.gguf)
    if any(m != "local" for m in modes) and not models:
        parser.error("the llm and hybrid modes need --gguf LABEL=PATH")
    conversations = slice_conversations(
        load(args.data), count=args.conversations, sessions=args.sessions
    )
    n_turns = sum(len(c.turns) for c in conversations)
    n_q = sum(len(c.questions) for c in conversations)
    print(f"LoCoMo slice: {len(conversations)} conversation(s), first {args.sessions} sessions: "
          f"{n_turns} turns, {n_q} questions")  # fmt: skip
    print(describe_host())
    results: list[ModeResult] = []
    if "local" in modes:
        print("==> local", file=sys.stderr)
        results.append(run_mode(conversations, label="local", mode="local", server=None))
        print_tables(results, file=sys.stderr)  # so far: a later mode may take long
    for label, gguf in models.items():
        for mode in (m for m in modes if m != "local"):
            print(f"==> {mode} on {label}", file=sys.stderr)
            root = Path(os.environ.get("TMPDIR", "/tmp"))
            with model_server(gguf, threads=args.threads, ctx=args.ctx, root=root) as server:
                results.append(
                    run_mode(conversations, label=f"{mode} {label}", mode=mode, server=server)
                )
            print_tables(results, file=sys.stderr)
    print_tables(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
