"""The enqueue contract as data: task name, queue and the JSON Schema of each payload
version, generated from the same pydantic model the worker validates with.

    python -m memwell.intake.contract > docs/ingest-payload.v1.schema.json

A test regenerates it and fails when the committed file is stale, so the published
schema cannot drift from what the worker accepts.
"""

from __future__ import annotations

import json
from typing import Any

from memwell.core.queues import Queue, TaskName
from memwell.intake.turns import PAYLOAD_VERSION, IngestPayload

SCHEMA_ID = "https://memwell.dev/schemas/ingest-payload.v{v}.json"


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


if __name__ == "__main__":
    print(render_schema(), end="")
