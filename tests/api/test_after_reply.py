"""Work a request does not need for its reply (access tracking, summary requests) starts
once the reply is sent: the request middleware holds it until the last body chunk is
out, and releases it anyway if the request ends without one."""

from __future__ import annotations

import asyncio

from starlette.types import Receive, Scope, Send

from api.observability import RequestContextMiddleware
from memwell.core.background import after_reply, replying


async def _serve(events: list[str], *, reply: bool = True) -> None:
    """One GET through the middleware to an app that queues work, then replies."""

    async def work() -> None:
        events.append("work")

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        after_reply(work(), what="the test's work")
        # A turn of the loop before the reply: work started at once would run here.
        await asyncio.sleep(0)
        if not reply:
            events.append("no reply")
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.body":
            events.append("reply")

    scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
    await RequestContextMiddleware(app)(scope, receive, send)  # type: ignore[arg-type]
    for _ in range(3):  # the released work's turn of the loop
        await asyncio.sleep(0)


def test_work_after_reply_starts_once_the_reply_is_sent() -> None:
    events: list[str] = []
    asyncio.run(_serve(events))
    assert events == ["reply", "work"]


def test_work_after_reply_starts_when_a_request_ends_without_a_reply() -> None:
    events: list[str] = []
    asyncio.run(_serve(events, reply=False))
    assert events == ["no reply", "work"]


def test_work_after_reply_outside_a_request_or_after_its_reply_starts_at_once() -> None:
    async def run() -> list[str]:
        events: list[str] = []

        async def work(name: str) -> None:
            events.append(name)

        after_reply(work("outside"), what="outside a request")
        await asyncio.sleep(0)
        with replying() as reply_sent:
            reply_sent()
            after_reply(work("after the reply"), what="after the reply")
            await asyncio.sleep(0)
            events.append("block still open")
        return events

    assert asyncio.run(run()) == ["outside", "after the reply", "block still open"]
