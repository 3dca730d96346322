"""The documented enqueue contract works for a producer that has none of our code,
and the published JSON Schema is the one the worker validates with."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import Memory, Turn
from memwell.intake.contract import packaged_schema, payload_schema, render_schema
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess

SCRIPT = Path(__file__).parents[1] / "contract" / "foreign_producer.py"


def _send_foreign(redis_url: str, payload: dict[str, object]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-I", str(SCRIPT), redis_url, json.dumps(payload)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},  # nothing of ours: no PYTHONPATH, no settings
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_foreign_celery_app_enqueues_and_the_worker_consolidates(
    stack_env: dict[str, str], worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    tenant = ids["tenant"]
    payload = {
        "v": 1,
        "tenant": tenant,
        "request_id": "foreign-req-1",
        "turns": [
            {
                "id": f"ext-{n}",
                "user_id": ids["user"],
                "session_id": "s1",
                "role": "user",
                "content": text,
                "created_at": "2023-05-08T13:56:00Z",
                "metadata": {"source": "crm"},
            }
            for n, text in enumerate(["I work as a nurse in Leeds.", "My sister is called Ines."])
        ],
    }
    jsonschema.validate(payload, payload_schema())  # what the docs promise is what we send
    sent = _send_foreign(stack_env["REDIS_URL"], payload)
    assert sent["memwell_modules_loaded"] == []
    _send_foreign(stack_env["REDIS_URL"], payload)  # a resend: same ids, nothing doubles

    def statuses() -> list[str]:
        with db() as session:
            return list(session.scalars(select(Turn.status).where(Turn.tenant == tenant)).all())

    wait_for(lambda: statuses() == ["processed", "processed"], timeout=60)
    with db() as session:
        memories = session.scalars(select(Memory).where(Memory.tenant == tenant)).all()
    # Extraction rewrites each turn standalone; provenance ties the memories to the turns.
    turn_ids = {t["id"] for t in payload["turns"]}  # type: ignore[index, union-attr]
    assert memories and {i for m in memories for i in m.source_turn_ids} == turn_ids
    assert all(m.created_at.isoformat().startswith("2023-05-08T13:56") for m in memories)


def test_published_schema_is_fresh(repo_root: Path) -> None:
    for copy in ("docs", "memwell/intake"):
        published = (repo_root / copy / "ingest-payload.v1.schema.json").read_text()
        assert published == render_schema(), (
            f"{copy}/ingest-payload.v1.schema.json is stale: run "
            "`python -m memwell.intake.contract --write`"
        )
    assert packaged_schema() == render_schema()


def test_schema_rejects_what_the_worker_rejects() -> None:
    schema = payload_schema()
    good = {"v": 1, "tenant": "t", "turns": [{"user_id": "u", "session_id": "s", "content": "x"}]}
    jsonschema.validate(good, schema)
    for bad in (
        {**good, "v": 2},
        {**good, "turns": []},
        {**good, "surprise": 1},
        {**good, "turns": [{"user_id": "u", "session_id": "s"}]},
    ):
        try:
            jsonschema.validate(bad, schema)
        except jsonschema.ValidationError:
            continue
        raise AssertionError(f"schema accepted {bad}")
