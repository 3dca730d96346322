"""`memwell up --llm-gguf <the 0.5B model> --demo --exit-after-demo`, as the README
says: three `[ok]` lines, and each memory it recalled says who wrote it.

At the default pipeline mode (auto: local, with a model or without) the chat replies
come from the model and consolidation is local mode's: every mode that used the 0.5B
model recalled less on LoCoMo (docs/evaluation.md). It mostly copies, invents ("Ada
Okafor is a software engineer") or restates the assistant. The model's own extraction
is tested in LLM mode by test_pipeline.py."""

from __future__ import annotations

import re
import time
from pathlib import Path

import psycopg
import pytest

from memwell.local.embedded import EmbeddedPostgres
from tests.real_llm.conftest import elapsed, extractor
from tests.support.up_process import Up

# A real model on a small CPU: minutes, not the default run's 300 s per test.
pytestmark = [pytest.mark.real_llm, pytest.mark.timeout(1800)]

# A question, then its top memory: the first "recalled" line under it.
RECALLED = re.compile(
    r"^  > (?P<question>.+)\n    recalled  score=\S+ \(relevance \S+\)  (?P<top>.+)$", re.MULTILINE
)


def test_the_demo_recalls_each_fact_and_says_who_wrote_it(
    test_gguf: Path, tmp_path: Path, repo_root: Path
) -> None:
    data = tmp_path / "data"
    started = time.monotonic()
    up = Up(data, repo_root, "demo", "--llm-gguf", str(test_gguf), "--demo", "--exit-after-demo")
    code = up.process.wait(timeout=1200)
    text = up.text()
    print(f"demo: {elapsed(started)}\n{text[-3000:]}")
    assert code == 0, text[-4000:]
    assert len(re.findall(r"^  \[ok\] ", text, re.MULTILINE)) == 3, text[-3000:]

    user = re.search(r"Session 1 \(user (?P<user>demo-\w+)\)", text)
    assert user is not None
    tops = [m["top"] for m in RECALLED.finditer(text)]
    assert len(tops) == 3, text[-3000:]
    stored = _memories(data, user["user"])
    writers = {}
    for top in tops:
        assert top in stored, (top, sorted(stored))
        writers[top] = extractor(stored[top])
    print(f"recalled, by writer: {writers}")
    assert set(writers.values()) <= {"llm", "local"}, writers


def _memories(data: Path, user_id: str) -> dict[str, dict[str, object]]:
    """The user's live memories by content, read from the stopped stack's Postgres."""
    postgres = EmbeddedPostgres(pgdata=data / "pgdata")
    url = postgres.start().replace("postgresql+psycopg://", "postgresql://")
    try:
        with psycopg.connect(url) as conn:
            rows = conn.execute(
                "SELECT content, metadata FROM memories WHERE user_id = %s AND deleted_at IS NULL",
                (user_id,),
            ).fetchall()
    finally:
        postgres.stop()
    return {str(content): dict(metadata or {}) for content, metadata in rows}
