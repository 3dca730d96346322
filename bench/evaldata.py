"""Where the external evaluation data lives, and LoCoMo parsing shared by the evals.

The data is never copied into the repo: it is read from MEMWELL_EVAL_DATA, or from
../shared/data next to the project root. Evaluations skip cleanly when it is missing.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


def data_root() -> Path:
    env = os.environ.get("MEMWELL_EVAL_DATA")
    candidates = [Path(env)] if env else []
    candidates += [REPO_ROOT.parent / "shared" / "data", Path("/work/shared/data")]
    for path in candidates:
        if path.is_dir():
            return path
    return candidates[0]


def require(relative: str) -> Path:
    """The data file, or exit 0 with a message saying it is missing."""
    path = data_root() / relative
    if not path.exists():
        print(f"SKIP: {path} not found (set MEMWELL_EVAL_DATA to the data folder)")
        sys.exit(0)
    return path


@dataclass(frozen=True)
class LocomoTurn:
    sample_id: str
    session: int
    dia_id: str
    speaker: str
    text: str
    when: datetime
    caption: str | None


def parse_session_date(raw: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> an aware datetime."""
    return datetime.strptime(raw, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def locomo_turns(sample: dict[str, Any]) -> Iterator[LocomoTurn]:
    conv = sample["conversation"]
    n = 1
    while f"session_{n}" in conv:
        when = parse_session_date(conv[f"session_{n}_date_time"])
        for t in conv[f"session_{n}"]:
            yield LocomoTurn(
                sample_id=sample["sample_id"],
                session=n,
                dia_id=t["dia_id"],
                speaker=t["speaker"],
                text=t["text"],
                when=when,
                caption=t.get("blip_caption"),
            )
        n += 1


def evidence_ids(sample: dict[str, Any]) -> set[str]:
    """Every (cleaned) evidence dia_id of the sample's questions."""
    out: set[str] = set()
    for qa in sample["qa"]:
        for raw in qa.get("evidence", []):
            out.update(f"D{a}:{b}" for a, b in _EVIDENCE.findall(str(raw)))
    return out


def load_locomo() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(require("locomo/locomo-dev.json").read_text())
    return data
