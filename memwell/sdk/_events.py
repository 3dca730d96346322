"""The Server-Sent Events of a streamed chat, read line by line; shared by the sync and
async clients."""

from __future__ import annotations

import json
from typing import Any

from memwell.sdk._transport import problem_error
from memwell.sdk.models import ChatStreamEvent

STREAM_HEADERS = {"Accept": "text/event-stream"}


class EventReader:
    """Feed it the lines of a text/event-stream; it returns each event once the blank
    line that ends it arrives, and raises the mapped APIError for an `error` event."""

    def __init__(self, request_id: str) -> None:
        self._request_id = request_id
        self._name = "message"
        self._data: list[str] = []

    def feed(self, line: str) -> ChatStreamEvent | None:
        if line.startswith(":"):  # a comment, e.g. a keep-alive
            return None
        if line:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                self._name = value
            elif field == "data":
                self._data.append(value)
            return None
        name, data = self._name, "\n".join(self._data)
        self._name, self._data = "message", []
        return self._event(name, json.loads(data)) if data else None

    def _event(self, name: str, data: Any) -> ChatStreamEvent:
        if name == "error":
            body = data if isinstance(data, dict) else {}
            status = body.get("status")
            raise problem_error(
                status if isinstance(status, int) else 500,
                body,
                title="the stream failed",
                request_id=self._request_id,
            )
        if name == "memories":
            return ChatStreamEvent(event=name, memories=data)
        fields = data if isinstance(data, dict) else {}
        return ChatStreamEvent.model_validate({**fields, "event": name})
