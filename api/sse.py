"""Server-Sent Events (text/event-stream) out of an async generator of frames."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from fastapi.encoders import jsonable_encoder
from fastapi.responses import StreamingResponse
from starlette.types import Send

#: Intermediaries must pass each event on as it comes, not collect the response first.
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def frame(event: str, data: Any) -> bytes:
    """One event on the wire: its name, and its data as one line of JSON."""
    return f"event: {event}\ndata: {json.dumps(jsonable_encoder(data))}\n\n".encode()


class EventStream(StreamingResponse):
    """A stream of events whose producer is closed however the response ends.

    When the client hangs up, Starlette stops iterating (its send is cancelled or
    fails) but leaves the generator suspended until it is collected; closing it here
    runs the producer's clean-up at once."""

    media_type = "text/event-stream"

    def __init__(self, frames: AsyncGenerator[bytes, None]) -> None:
        super().__init__(frames, headers=STREAM_HEADERS)
        self._frames = frames

    async def stream_response(self, send: Send) -> None:
        try:
            await super().stream_response(send)
        finally:
            await self._frames.aclose()
