"""Read turns from files for `memwell import`: JSONL of turns, or LoCoMo conversations.

Every turn gets a stable id derived from the file's content (never a random one), so
importing the same file twice stores each turn once.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memwell.core.errors import InvalidInput
from memwell.core.redaction import describe
from memwell.intake.turns import TurnIn

LOCOMO_DATE = "%I:%M %p on %d %B, %Y"
_SESSION_KEY = re.compile(r"^session_(\d+)$")


def read_jsonl(path: Path) -> list[TurnIn]:
    """One turn per line, shaped like POST /v1/turns items. A line without an `id`
    gets one from its user, session, line number and content."""
    turns = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                if not isinstance(raw, dict):
                    raise ValueError("a line must be a JSON object")
                raw.setdefault("id", _stable_id(raw, line_no))
                turns.append(TurnIn.model_validate(raw))
            except ValidationError as exc:  # its text would quote the line: name the rules
                raise InvalidInput(f"{path}:{line_no}: {describe(exc)}") from None
            except ValueError as exc:
                raise InvalidInput(f"{path}:{line_no}: {exc}") from exc
    return turns


def _stable_id(raw: dict[str, Any], line_no: int) -> str:
    key = json.dumps(
        [raw.get("user_id"), raw.get("session_id"), line_no, raw.get("content")], sort_keys=True
    )
    return "jsonl:" + hashlib.sha256(key.encode()).hexdigest()[:24]


def parse_locomo_date(text: str) -> datetime:
    """LoCoMo's session dates, e.g. "1:56 pm on 8 May, 2023" (taken as UTC)."""
    return datetime.strptime(text.strip(), LOCOMO_DATE).replace(tzinfo=UTC)


def read_locomo(path: Path) -> list[TurnIn]:
    """One user per conversation (its sample_id), one session per LoCoMo session, the
    session's date as every turn's event time, the speaker's name in the content and
    metadata, an image's caption in metadata, and the turn id `{sample_id}:{dia_id}`.
    Annotations (observations, summaries, QA) are not conversation and are not
    imported."""
    samples = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(samples, list):
        raise InvalidInput(f"{path}: a LoCoMo file is a JSON list of samples")
    return [turn for sample in samples for turn in _locomo_sample(sample)]


def _locomo_sample(sample: dict[str, Any]) -> Iterator[TurnIn]:
    sample_id = str(sample["sample_id"])
    conversation: dict[str, Any] = sample["conversation"]
    sessions = sorted(
        (int(m.group(1)), key) for key in conversation if (m := _SESSION_KEY.match(key))
    )
    for number, key in sessions:
        when = parse_locomo_date(conversation[f"{key}_date_time"])
        for item in conversation[key]:
            yield TurnIn(
                id=f"{sample_id}:{item['dia_id']}",
                user_id=sample_id,
                session_id=f"{sample_id}:session_{number}",
                role="user",
                content=f"{item['speaker']}: {item['text']}",
                created_at=when,
                metadata=_locomo_metadata(item),
            )


def _locomo_metadata(item: dict[str, Any]) -> dict[str, Any]:
    # The caption stands for an image the speaker shared: in metadata, extraction
    # turns it into its own memory ("Melanie shared a photo of a dog").
    metadata = {"speaker": item["speaker"], "dia_id": item["dia_id"]}
    if caption := item.get("blip_caption"):
        metadata["image_caption"] = caption
    return metadata


READERS = {"jsonl": read_jsonl, "locomo": read_locomo}
