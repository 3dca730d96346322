"""Sends a re-embed's step task, by its stable name, through the one broker door."""

from __future__ import annotations

from memwell.core.queues import TaskName
from memwell.intake.dispatch import send_by_name
from memwell.reembed.lifecycle import Dispatch


def step_sender(broker_url: str | None = None) -> Dispatch:
    def send(migration_id: int, token: str) -> None:
        send_by_name(
            TaskName.REEMBED_STEP.value,
            {"migration_id": migration_id, "token": token},
            broker_url=broker_url,
        )

    return send
