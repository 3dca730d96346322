"""Local mode against LLM mode (and the hybrid) on one LoCoMo slice, side by side.

    python -m bench.evals.llm_modes [--gguf 0.5b=PATH]... [--recorded] \
        [--modes local,llm,hybrid] [--conversations 1] [--sessions 6]

The slice is the first `--sessions` sessions (0: all) of the first `--conversations`
dev conversations, and the questions whose evidence lies wholly inside it. Each mode
gets a throwaway stack of its own (embedded Postgres + Valkey, one real worker). With
`--gguf`, the LLM modes get llama.cpp's server (`python -m llama_cpp.server`, the
llm-local extra) on the given GGUF, started here and stopped after the mode, with the
arguments and the client settings `memwell up --llm-gguf` uses, and a worker of one
process on the llm queue. With `--recorded`, they get the recorded model
(bench/harness/recorded_model.py: what GPT-3.5-turbo wrote about these conversations,
as LoCoMo records it) as a hosted endpoint, at the client settings a hosted endpoint
gets. Every turn is enqueued at once, as a user's import would, at shipped settings;
once all are settled, the idle-session job runs as beat would send it (the sessions'
last turns are long past), which writes each session's summary memory.

Per mode: R@10 per category, R@10 with one evidence turn per hit, answer containment,
tokens of the top 10, consolidation turns/s (enqueue to the last turn settled), model
calls and tokens per stored turn (from llm_usage), windows deferred (a slow model's, sent
again later), fallbacks by step and reason, dead letters, and who wrote the memories
(their provenance). Local mode is the baseline of the same run.
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
from bench.harness.recorded_model import MODEL_NAME, RecordedModel, recorded_server
from bench.harness.stack import LOCOMO_DEFAULT, BenchStack, full_stack, stop_group
from memwell.core.queues import TaskName
from memwell.core.settings import get_settings
from memwell.db.engine import make_engine
from memwell.intake.dispatch import send_by_name
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
    #: windows the model ran out of time on, left pending to be sent again
    deferrals: int = 0
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
        turns = [t for t in conv.turns if not sessions or _session_number(dia_id(t)) <= sessions]
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
                     "coalesce(sum(completion_tokens),0), coalesce(sum(failures),0), "
                     "coalesce(sum(deferrals),0) FROM llm_usage WHERE tenant = :t"),
                {"t": TENANT},
            ).one()  # fmt: skip
            (result.calls, result.prompt_tokens, result.completion_tokens, result.failures,
             result.deferrals) = map(int, usage)  # fmt: skip
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


def close_idle(database_url: str, redis_url: str) -> None:
    """Send the idle-session job as beat does, and wait until it has closed every
    session (each gets its summary memory). The slice's sessions are dated long ago,
    so every one is idle at once."""
    send_by_name(TaskName.CLOSE_IDLE_SESSIONS.value, {}, broker_url=redis_url)
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.connect() as conn:
            total = int(conn.execute(
                text("SELECT count(*) FROM sessions WHERE tenant = :t"), {"t": TENANT}
            ).scalar_one())  # fmt: skip
        with progress("closed sessions", total) as bar:
            while True:
                with engine.connect() as conn:
                    open_ = int(conn.execute(
                        text("SELECT count(*) FROM sessions WHERE tenant = :t "
                             "AND status = 'open'"), {"t": TENANT},
                    ).scalar_one())  # fmt: skip
                bar.update(total - open_)
                if not open_:
                    break
                time.sleep(1.0)
    finally:
        engine.dispose()


@contextmanager
def ingested(
    conversations: list[Conversation],
    *,
    mode: str,
    endpoint: dict[str, str] | None = None,
    llm_worker: bool = False,
) -> Iterator[tuple[BenchStack, float]]:
    """A stack of its own for one mode, with the slice ingested and its sessions closed:
    the stack and the ingest's seconds. `endpoint`: the clients' settings for the model
    server; `llm_worker`: the llm queue in a worker of one process of its own, as
    `memwell up --llm-gguf` runs it."""
    env = {"MEMWELL_PIPELINE_MODE": mode, **(endpoint or {})}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    get_settings.cache_clear()
    try:
        with full_stack(extra_env=env, llm_worker=llm_worker) as stack:
            assert stack.redis_url is not None
            seconds = ingest(conversations, stack.database_url, stack.redis_url)
            close_idle(stack.database_url, stack.redis_url)
            yield stack, seconds
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        get_settings.cache_clear()


def run_mode(
    conversations: list[Conversation],
    *,
    label: str,
    mode: str,
    endpoint: dict[str, str] | None = None,
    llm_worker: bool = False,
) -> ModeResult:
    """One mode on a stack of its own (`ingested`): ingest the slice, close its
    sessions, ask its questions."""
    stacked = ingested(conversations, mode=mode, endpoint=endpoint, llm_worker=llm_worker)
    with stacked as (stack, seconds):
        scores = evaluate_memwell(conversations, stack.database_url, ["default"])["default"]
        result = ModeResult(label, scores, sum(len(c.turns) for c in conversations),
                            seconds, {})  # fmt: skip
        collect(stack.database_url, result)
    return result


@contextmanager
def recorded_endpoint(data: Path) -> Iterator[dict[str, str]]:
    """The recorded model as a hosted endpoint: the clients' settings that point at it
    (a hosted endpoint's defaults otherwise)."""
    model = RecordedModel.from_file(data)
    with recorded_server(model) as base_url:
        yield {
            "OPENAI_BASE_URL": base_url,
            "OPENAI_API_KEY": "recorded",
            "MEMWELL_CHAT_MODEL": MODEL_NAME,
            # It answers at once and without a quota. At the shipped 60 calls a minute,
            # the idle-session job's one batch of every session (a summary call each)
            # is rate-limited part way, rolls back and retries without end.
            "MEMWELL_LLM_RPM": "0",
        }
    print(f"recorded model: {_fmt_map(dict(model.stats))}", file=sys.stderr)


def _fmt_map(values: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(values.items())) or "0"


def print_recall(
    first: str, rows: Sequence[tuple[str, Scores]], *, file: TextIO = sys.stdout
) -> None:
    """One row per retriever: R@10 overall and per category, R@10 with one evidence turn
    per hit, answer containment, tokens of the top 10; `first` heads the names."""
    cats = list(CATEGORIES)
    print(f"\n| {first} | R@10 | " + " | ".join(CATEGORIES[c] for c in cats)
          + " | R@10/1 | containment | tokens of top 10 |", file=file)  # fmt: skip
    print("|---" * (len(cats) + 5) + "|", file=file)
    for label, scores in rows:
        overall = scores.summary(cats)
        per = " | ".join(f"{scores.summary([c]).r10:.3f}" for c in cats)
        contain = "-" if overall.containment is None else f"{overall.containment:.3f}"
        print(f"| {label} | {overall.r10:.3f} | {per} | {overall.r10_one:.3f} | "
              f"{contain} | {overall.tokens:.1f} |", file=file)  # fmt: skip


def print_tables(results: Sequence[ModeResult], *, file: TextIO = sys.stdout) -> None:
    print_recall("mode", [(r.label, r.scores) for r in results], file=file)
    print(
        "\n| mode | turns | turns/s | model calls / turn | failed calls | prompt tok / turn | "
        "completion tok / turn | deferred | fallbacks | dead letters | settled | "
        "memories by writer |",
        file=file,
    )
    print("|---" * 12 + "|", file=file)
    for r in results:
        n = max(r.turns, 1)
        print(f"| {r.label} | {r.turns} | {r.turns / r.seconds:.2f} | {r.calls / n:.3f} | "
              f"{r.failures} | "
              f"{r.prompt_tokens / n:.1f} | {r.completion_tokens / n:.1f} | "
              f"{r.deferrals} | {_fmt_map(r.fallbacks)} | {r.dead_letters} | "
              f"{_fmt_map(r.settled)} | {_fmt_map(r.writers)} |", file=file)  # fmt: skip


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
    parser.add_argument("--sessions", type=int, default=6, help="0: whole conversations")
    parser.add_argument(
        "--recorded", action="store_true", help="add the LLM modes on the recorded model"
    )
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
    if any(m != "local" for m in modes) and not (models or args.recorded):
        parser.error("the llm and hybrid modes need --gguf LABEL=PATH or --recorded")
    conversations = slice_conversations(
        load(args.data), count=args.conversations, sessions=args.sessions
    )
    n_turns = sum(len(c.turns) for c in conversations)
    n_q = sum(len(c.questions) for c in conversations)
    sessions = f"first {args.sessions} sessions" if args.sessions else "all sessions"
    print(f"LoCoMo slice: {len(conversations)} conversation(s), {sessions}: "
          f"{n_turns} turns, {n_q} questions")  # fmt: skip
    print(describe_host())
    results: list[ModeResult] = []
    if "local" in modes:
        print("==> local", file=sys.stderr)
        results.append(run_mode(conversations, label="local", mode="local"))
        print_tables(results, file=sys.stderr)  # so far: a later mode may take long
    for mode in (m for m in modes if m != "local" and args.recorded):
        print(f"==> {mode} recorded", file=sys.stderr)
        with recorded_endpoint(args.data) as endpoint:
            results.append(
                run_mode(conversations, label=f"{mode} recorded", mode=mode, endpoint=endpoint)
            )
        print_tables(results, file=sys.stderr)
    for label, gguf in models.items():
        for mode in (m for m in modes if m != "local"):
            print(f"==> {mode} on {label}", file=sys.stderr)
            root = Path(os.environ.get("TMPDIR", "/tmp"))
            with model_server(gguf, threads=args.threads, ctx=args.ctx, root=root) as server:
                endpoint = server.client_env(get_settings())
                results.append(
                    run_mode(
                        conversations,
                        label=f"{mode} {label}",
                        mode=mode,
                        endpoint=endpoint,
                        llm_worker=True,
                    )  # fmt: skip
                )
            print_tables(results, file=sys.stderr)
    print_tables(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
