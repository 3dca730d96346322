"""One validation for every door: the same hostile text (a NUL, a control character, a
lone surrogate, blank text, text over the limit) is refused by every door that takes
text, naming the same rule, with no 5xx, and nothing is stored.

The doors: REST chat (JSON and streamed), the OpenAI door (JSON and streamed), turns,
direct memory add and edit, search and context; the MCP tools remember, add_memory,
update_memory, recall and get_context (in-process, through the MCP SDK's own argument
validation); the enqueue client and the Celery contract's payload; JSONL import.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from mcp import Client
from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.agents.mcp_server import build_deps, create_server
from memwell.core.errors import InvalidInput
from memwell.core.settings import get_settings
from memwell.db.models import Memory, Turn
from memwell.intake.importers import read_jsonl
from memwell.intake.turns import MAX_CONTENT_CHARS, IngestPayload

#: The rule each kind of hostile text breaks, as every door's refusal names it.
CONTROLS = [chr(c) for c in (*range(1, 9), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)]
#: Bidirectional embeddings, overrides and isolates (the "Trojan Source" characters).
BIDI = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]
_WORDS = st.text(alphabet="abcdefghij klmnop", min_size=1, max_size=30)


def _around(bad: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.builds(lambda a, b, c: f"x{a}{b}{c}", _WORDS, bad, _WORDS)


HOSTILE = st.one_of(
    st.tuples(st.just("NUL"), _around(st.just("\x00"))),
    st.tuples(st.just("control characters"), _around(st.sampled_from(CONTROLS))),
    st.tuples(st.just("bidirectional control"), _around(st.sampled_from(BIDI))),
    # Pydantic's own check on any str field names it "a unicode string".
    st.tuples(
        st.just("surrogate|unicode string"),
        _around(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)),
    ),
    st.tuples(st.just("blank"), st.text(alphabet=" \t\n\r", min_size=1, max_size=12)),
    st.tuples(
        st.just("at most"),
        st.integers(MAX_CONTENT_CHARS + 1, MAX_CONTENT_CHARS + 500).map("a".__mul__),
    ),
)


def _raw(body: dict[str, Any]) -> bytes:
    # ASCII JSON: a lone surrogate travels as its \\uXXXX escape, as a client sends it.
    return json.dumps(body).encode()


class Doors:
    """Every door, each called with the same text; each returns its refusal as text."""

    def __init__(self, api: TestClient, key: dict[str, str], tenant: str, user: str) -> None:
        self.api, self.key, self.tenant, self.user = api, key, tenant, user
        body = {"user_id": user, "memories": [{"content": "Likes figs."}]}
        added = api.post("/v1/memories", headers=key, json=body)
        assert added.status_code == 200, added.text
        self.memory_id = added.json()["results"][0]["memory_id"]
        self.mcp = create_server(build_deps(get_settings(), tenant=tenant))

    def _rest(self, method: str, path: str, body: dict[str, Any], status: int) -> str:
        headers = {**self.key, "Content-Type": "application/json", "X-Memwell-Session": "h"}
        response = self.api.request(method, path, content=_raw(body), headers=headers)
        assert response.status_code == status, (path, response.status_code, response.text[:300])
        return response.text

    def rest(self, text: str) -> dict[str, str]:
        user = self.user
        message = [{"role": "user", "content": text}]
        refusals = {}
        for stream in (False, True):
            refusals[f"chat stream={stream}"] = self._rest(
                "POST", "/v1/chat",
                {"user_id": user, "session_id": "h", "message": text, "stream": stream}, 422,
            )  # fmt: skip
            refusals[f"completions stream={stream}"] = self._rest(
                "POST", "/v1/chat/completions",
                {"model": "m", "user": user, "messages": message, "stream": stream}, 400,
            )  # fmt: skip
        refusals["turns"] = self._rest(
            "POST", "/v1/turns", {"turns": [{"user_id": user, "session_id": "h", "content": text}]},
            422,
        )  # fmt: skip
        refusals["memories add"] = self._rest(
            "POST", "/v1/memories", {"user_id": user, "memories": [{"content": text}]}, 422
        )
        refusals["memories edit"] = self._rest(
            "PATCH", f"/v1/memories/{self.memory_id}", {"content": text}, 422
        )
        refusals["search"] = self._rest(
            "POST", "/v1/memories/search", {"user_id": user, "query": text}, 422
        )
        refusals["context"] = self._rest(
            "POST", "/v1/context", {"user_id": user, "session_id": "h", "query": text}, 422
        )
        return refusals

    def mcp_tools(self, text: str) -> dict[str, str]:
        calls: dict[str, dict[str, Any]] = {
            "remember": {"user_id": self.user, "content": text},
            "add_memory": {"user_id": self.user, "content": text},
            "update_memory": {"user_id": self.user, "memory_id": self.memory_id, "content": text},
            "recall": {"user_id": self.user, "query": text},
            "get_context": {"user_id": self.user, "query": text},
        }

        async def run() -> dict[str, str]:
            refusals = {}
            async with Client(self.mcp) as client:
                for tool, arguments in calls.items():
                    result = await client.call_tool(tool, arguments)
                    assert result.is_error, (tool, result.content)
                    refusals[f"mcp {tool}"] = " ".join(
                        getattr(part, "text", "") for part in result.content
                    )
            return refusals

        return asyncio.run(run())

    def python(self, text: str, tmp: Path) -> dict[str, str]:
        refusals = {}
        turn = {"user_id": self.user, "session_id": "h", "content": text}
        with pytest.raises(ValidationError) as enqueue:
            memwell.enqueue_turns([turn], tenant=self.tenant)
        refusals["enqueue_turns"] = str(enqueue.value)
        with pytest.raises(ValidationError) as contract:
            IngestPayload.model_validate({"v": 1, "tenant": self.tenant, "turns": [turn]})
        refusals["celery contract"] = str(contract.value)
        lines = tmp / "turns.jsonl"
        lines.write_text(json.dumps(turn) + "\n", encoding="ascii")
        with pytest.raises(InvalidInput) as imported:
            read_jsonl(lines)
        refusals["import"] = str(imported.value)
        return refusals


@pytest.fixture(scope="module")
def doors(
    api: TestClient, stack_env: dict[str, str], make_key: Callable[..., dict[str, str]]
) -> Iterator[Doors]:
    tenant, user = "t-hostile", "u-hostile"
    yield Doors(api, make_key(tenant, ("read", "write")), tenant, user)


@settings(
    max_examples=25, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)  # fmt: skip
@given(case=HOSTILE)
@example(case=("bidirectional control", "price: \u202e001$"))  # the rule every door added last
def test_every_door_refuses_the_same_text_alike(
    doors: Doors, tmp_path: Path, case: tuple[str, str]
) -> None:
    rule, text = case
    refusals = {**doors.rest(text), **doors.mcp_tools(text), **doors.python(text, tmp_path)}
    unnamed = {door: why[:200] for door, why in refusals.items() if not re.search(rule, why)}
    assert not unnamed, f"doors that did not name {rule!r}: {unnamed}"


def test_nothing_hostile_was_stored(doors: Doors, db: sessionmaker[Session]) -> None:
    with db() as session:
        turns = session.scalar(
            select(func.count()).select_from(Turn).where(Turn.tenant == doors.tenant)
        )
        memories = session.scalars(select(Memory.content).where(Memory.tenant == doors.tenant))
        assert turns == 0
        assert list(memories) == ["Likes figs."]
