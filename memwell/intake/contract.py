"""The enqueue contract as data: task name, queue and the JSON Schema of each payload
version, generated from the same pydantic model the worker validates with.

    python -m memwell.intake.contract --write

writes it twice: into the package (memwell/intake/, shipped in the wheel for producers
that validate before they send) and into docs/ (published with the documentation). A
test regenerates it and fails when either committed file is stale, so the published
schema cannot drift from what the worker accepts.
"""

from __future__ import annotations

import json
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

from memwell.core.queues import Queue, TaskName
from memwell.intake.turns import PAYLOAD_VERSION, IngestPayload

SCHEMA_ID = "https://memwell.dev/schemas/ingest-payload.v{v}.json"
SCHEMA_FILE = f"ingest-payload.v{PAYLOAD_VERSION}.schema.json"


def payload_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the `payload` kwarg of `memwell.ingest_turns`."""
    schema = IngestPayload.model_json_schema(mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID.format(v=PAYLOAD_VERSION),
        "title": f"Memwell ingest payload, version {PAYLOAD_VERSION}",
        "description": (
            f"Keyword argument `payload` of Celery task `{TaskName.INGEST_TURNS.value}` on "
            f"queue `{Queue.INGEST.value}` (JSON serializer). Turn `id` is the idempotency "
            "key within a tenant; `created_at` is the event time."
        ),
        **{k: v for k, v in schema.items() if k not in {"title", "description"}},
    }


def render_schema() -> str:
    return json.dumps(payload_schema(), indent=2, sort_keys=True) + "\n"


def packaged_schema() -> str:
    """The schema as shipped in the installed package."""
    return files("memwell.intake").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


def write_schema(repo_root: Path) -> list[Path]:
    """Rewrite the packaged and the published copy in a checkout; returns their paths."""
    targets = [repo_root / "memwell" / "intake" / SCHEMA_FILE, repo_root / "docs" / SCHEMA_FILE]
    for target in targets:
        target.write_text(render_schema(), encoding="utf-8")
    return targets


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        for path in write_schema(Path(__file__).resolve().parents[2]):
            print(f"wrote {path}", file=sys.stderr)
    else:
        print(render_schema(), end="")
