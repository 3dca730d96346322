"""A producer from another codebase: only `celery`, never Memwell's code.

Run isolated (`python -I`, so neither PYTHONPATH nor the script's folder is on
sys.path) with the broker URL and the payload as JSON:

    python -I foreign_producer.py redis://... '{"v": 1, "tenant": ..., "turns": [...]}'

Importing memwell, api or worker is blocked outright, so the contract is all it
knows: task name, queue, JSON serializer, keyword argument `payload`.
"""

import json
import sys
from importlib.abc import MetaPathFinder

OURS = {"memwell", "api", "worker"}


class BlockMemwell(MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname.split(".")[0] in OURS:
            raise ImportError(f"the foreign producer must not import {fullname}")
        return


sys.meta_path.insert(0, BlockMemwell())

from celery import Celery  # noqa: E402

broker_url, payload_json = sys.argv[1], sys.argv[2]
app = Celery("someone-elses-app", broker=broker_url, set_as_current=False)
app.conf.task_serializer = "json"
result = app.send_task(
    "memwell.ingest_turns", kwargs={"payload": json.loads(payload_json)}, queue="ingest"
)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in OURS)
print(json.dumps({"task_id": result.id, "memwell_modules_loaded": loaded}))
