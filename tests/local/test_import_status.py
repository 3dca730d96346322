"""`memwell import` (JSONL and LoCoMo formats, idempotent re-runs) and `memwell status`,
run as the operator runs them: the CLI in a subprocess against the real stack."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.errors import InvalidInput
from memwell.db.models import Memory, Turn
from memwell.intake.importers import read_jsonl, read_locomo
from memwell.local.worker_process import WorkerProcess


def _locomo_file(tmp_path: Path, sample_id: str) -> Path:
    sample = {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a support group."},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "How was it?",
                 "img_url": ["http://x"], "blip_caption": "a photo of a dog"},
            ],
            "session_2_date_time": "7:55 pm on 9 June, 2023",
            "session_2": [
                {"speaker": "Caroline", "dia_id": "D2:1", "text": "I started painting."},
            ],
        },
        "qa": [{"question": "What did Caroline start?", "answer": "painting",
                "evidence": ["D2:1"], "category": 4}],
        "observation": {"session_1_observation": {"Caroline": [["obs", "D1:1"]]}},
        "session_summary": {"session_1_summary": "a summary"},
        "event_summary": {},
    }  # fmt: skip
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]))
    return path


def test_locomo_reader_follows_the_protocol(tmp_path: Path) -> None:
    turns = read_locomo(_locomo_file(tmp_path, "conv-x"))
    assert [t.id for t in turns] == ["conv-x:D1:1", "conv-x:D1:2", "conv-x:D2:1"]
    assert {t.user_id for t in turns} == {"conv-x"}
    assert [t.session_id for t in turns] == ["conv-x:session_1"] * 2 + ["conv-x:session_2"]
    assert turns[0].created_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert turns[2].created_at == datetime(2023, 6, 9, 19, 55, tzinfo=UTC)
    assert turns[0].content == "Caroline: I went to a support group."
    assert turns[1].content == "Melanie: How was it?"
    assert turns[1].metadata["image_caption"] == "a photo of a dog"
    assert all("summary" not in t.content and t.content != "obs" for t in turns)


def test_jsonl_reader_makes_stable_ids_and_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    lines = [
        {"user_id": "u", "session_id": "s", "content": "first"},
        {"id": "mine", "user_id": "u", "session_id": "s", "content": "second"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    first, again = read_jsonl(path), read_jsonl(path)
    assert [t.id for t in first] == [t.id for t in again]
    assert first[1].id == "mine" and first[0].id.startswith("jsonl:")
    path.write_text(json.dumps(lines[0]) + "\n" + '{"user_id": "u", "content": "no session"}\n')
    with pytest.raises(InvalidInput, match=r"turns.jsonl:2"):
        read_jsonl(path)


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memwell", *args],
        env={**env, "MEMWELL_LOG_LEVEL": "WARNING"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_import_consolidates_and_a_rerun_is_idempotent(
    stack_env: dict[str, str],
    worker: WorkerProcess,
    db: sessionmaker[Session],
    ids: dict[str, str],
    tmp_path: Path,
) -> None:
    tenant, sample = ids["tenant"], f"conv-{ids['user']}"
    path = _locomo_file(tmp_path, sample)
    first = _cli(stack_env, "import", str(path), "--format", "locomo", "--tenant", tenant,
                 "--batch-size", "2")  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "turns          3  (3 enqueued, 0 already stored)" in first.stdout
    assert "consolidated   3" in first.stdout
    with db() as session:
        made = session.scalar(
            select(func.count()).select_from(Memory).where(Memory.tenant == tenant)
        )
    # Extraction keeps what is worth remembering: at least one memory, at most one a turn here.
    assert made and 1 <= made <= 3
    assert f"memories       {made}  (+{made} this run)" in first.stdout
    # It added memories: the searched tables' statistics are refreshed, not left to
    # autovacuum's next round.
    assert "statistics     refreshed for search" in first.stdout

    second = _cli(stack_env, "import", str(path), "--format", "locomo", "--tenant", tenant)
    assert second.returncode == 0, second.stderr
    assert "(0 enqueued, 3 already stored)" in second.stdout
    assert f"memories       {made}  (+0 this run)" in second.stdout
    assert "statistics" not in second.stdout  # nothing new to plan for
    with db() as session:
        turns = session.scalar(select(func.count()).select_from(Turn).where(Turn.tenant == tenant))
        memories = session.scalar(
            select(func.count()).select_from(Memory).where(Memory.tenant == tenant)
        )
    assert (turns, memories) == (3, made)


def test_import_refuses_a_bad_file_before_sending_anything(
    stack_env: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"user_id": "u", "session_id": "s", "content": "\\u0000"}\n')
    done = _cli(stack_env, "import", str(path))
    assert done.returncode != 0
    assert "bad.jsonl:1" in done.stderr


def test_status_reports_queues_workers_backlog_and_store(
    stack_env: dict[str, str], worker: WorkerProcess
) -> None:
    done = _cli(stack_env, "status", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report["queues"]) == {"ingest", "embed", "llm", "maintenance"}
    assert any(name.startswith(worker.hostname) for name in report["workers"])
    assert report["errors"] == {}
    assert {"turns", "memories_live", "dead_letters_open", "oldest_pending_s"} <= set(report)
    assert report["broker_url"] == stack_env["REDIS_URL"]  # no password to mask here
    assert report["api_url"].startswith("http://")
    text = _cli(stack_env, "status")
    assert "Workers alive" in text.stdout and "Backlog" in text.stdout
    assert f"Broker          {stack_env['REDIS_URL']}" in text.stdout
