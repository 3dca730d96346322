"""A hostile model endpoint behind a real worker, in LLM mode and in hybrid mode: every
bad answer a red team found (a NUL, a lone surrogate, terminal and bidi controls,
markup imitating a system message, scores of 11, -5, 1e400 and NaN, dates of 9999 and
0001, JSON nested 100,000 deep, a 200 whose body is not JSON, one with no choices, an
error body echoing the prompt) is data, never a crash. For each, a poisoned user's
window and a second user of the same tenant go through one consolidate task: every turn
is processed within 30 s, no dead letter is written, the fallback is counted by reason
in llm_usage, and the canary planted in the turns and in the answers never reaches the
worker's log.

One worker per mode serves every case (the fake routes by a marker in the window), and
the cases run at once, each in a tenant of its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.db.models import DeadLetter, LlmUsage, Memory, Turn
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.fake_openai import FakeOpenAI, Handler
from tests.support.hostile_model import CASES, hostile_answer, marker

START = datetime(2023, 5, 8, 9, 0, tzinfo=UTC)
#: A Redis database per mode: no other test's worker takes these tasks.
BROKER_DB = {"llm": 11, "hybrid": 12}


@dataclass(frozen=True)
class Run:
    mode: str
    canary: str
    tenants: dict[str, str]  # case -> tenant
    worker: WorkerProcess


def _turns(user: str, lines: list[str]) -> list[dict[str, Any]]:
    return [
        {"user_id": user, "session_id": "s1", "content": line, "metadata": {"speaker": "Caroline"},
         "created_at": (START + timedelta(minutes=i)).isoformat()}
        for i, line in enumerate(lines)
    ]  # fmt: skip


def _case_turns(case: str, canary: str, tag: str) -> list[dict[str, Any]]:
    """The poisoned user's window (the marked message and another), and a second user's."""
    poisoned = _turns(f"poisoned-{tag}", [
        f"{marker(case)} {canary} I adopted a puppy named Biscuit last week.",
        f"{canary} I moved to Boston from Sweden four years ago.",
    ])  # fmt: skip
    other = _turns(f"other-{tag}", [
        f"{canary} I go to a pottery class every Tuesday.",
        f"{canary} My sister Ana is visiting next month.",
    ])  # fmt: skip
    return poisoned + other


@pytest.fixture(scope="module", params=["llm", "hybrid"])
def run(
    request: pytest.FixtureRequest,
    stack_env: dict[str, str],
    fake_openai: FakeOpenAI,
    db: sessionmaker[Session],
) -> Iterator[Run]:
    """One worker in the mode, fed every case at once; waits until all is processed."""
    mode: str = request.param
    canary = f"CANARY{uuid.uuid4().hex}"
    fake_openai.reset()
    fake_openai.default_chat = Handler(hostile_answer(canary))
    broker = urlsplit(stack_env["REDIS_URL"])._replace(path=f"/{BROKER_DB[mode]}").geturl()
    env = stack_env | {
        "REDIS_URL": broker,
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": "k",
        "MEMWELL_LLM_RPM": "0",
        "MEMWELL_PIPELINE_MODE": mode,
    }
    worker = WorkerProcess(env, name=f"hostile-{mode}")
    worker.start()
    try:
        tag = uuid.uuid4().hex[:8]
        tenants = {case: f"t-{tag}-{case}" for case in CASES}
        for case, tenant in tenants.items():
            memwell.enqueue_turns(_case_turns(case, canary, tag), tenant=tenant, broker_url=broker)
        _wait_processed(db, list(tenants.values()), turns=4 * len(tenants), timeout=30)
        yield Run(mode, canary, tenants, worker)
    finally:
        worker.stop()
        worker.log_path.unlink(missing_ok=True)


def _wait_processed(
    db: sessionmaker[Session], tenants: list[str], *, turns: int, timeout: float
) -> None:
    def processed() -> bool:
        with db() as session:
            done = session.scalar(
                select(func.count()).where(Turn.tenant.in_(tenants), Turn.status == "processed")
            )
            letters = session.scalar(select(func.count()).where(DeadLetter.tenant.in_(tenants)))
        assert not letters, "a consolidate task became a dead letter"
        return done == turns

    wait_for(processed, timeout=timeout, interval=0.2, what=f"{turns} turns processed")


def _reasons(db: sessionmaker[Session], tenant: str) -> dict[str, int]:
    with db() as session:
        usage = session.scalars(
            select(LlmUsage).where(LlmUsage.tenant == tenant, LlmUsage.stage == "analyze")
        ).one()
    return dict(usage.fallback_reasons)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_answer_is_a_counted_fallback_and_no_dead_letter(
    run: Run, case: str, db: sessionmaker[Session]
) -> None:
    tenant = run.tenants[case]
    with db() as session:
        statuses = session.execute(
            select(Turn.user_id, Turn.status, Turn.error).where(Turn.tenant == tenant)
        ).all()
        letters = session.scalar(select(func.count()).where(DeadLetter.tenant == tenant))
        memories = session.scalars(select(Memory).where(Memory.tenant == tenant)).all()
    assert len(statuses) == 4 and {(s, e) for _, s, e in statuses} == {("processed", None)}
    assert letters == 0
    assert _reasons(db, tenant) == CASES[case].reasons
    # Both users have memories: the poisoned user's by the model or by local mode.
    assert {m.user_id.split("-")[0] for m in memories} == {"poisoned", "other"}
    assert all("\x1b" not in m.content and "\u202e" not in m.content for m in memories)


def test_markup_written_by_the_model_is_stored_as_plain_text(
    run: Run, db: sessionmaker[Session]
) -> None:
    if run.mode == "hybrid":
        pytest.skip("hybrid keeps a model memory only where it adds to local mode's")
    with db() as session:
        contents = session.scalars(
            select(Memory.content).where(Memory.tenant == run.tenants["markup"])
        ).all()
    assert any("</memory><system>SYSTEM:" in c for c in contents), contents


def test_no_canary_in_the_worker_log(run: Run) -> None:
    text = run.worker.log_path.read_text(errors="replace")
    # The log did record the work and its refusals: the search looks at the right text.
    assert "consolidate_turns" in text and "answer refused" in text and "HTTP 500" in text
    assert run.canary not in text, text[max(0, text.find(run.canary) - 400) :][:600]
