"""LangChain's chat history and retriever against the live API and a real worker: the
history's messages are consolidated into memories the retriever finds, and a tenant
sees only its own."""

from __future__ import annotations

import asyncio

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

import memwell
from memwell.integrations.langchain import MemwellChatMessageHistory, MemwellRetriever
from memwell.local.worker_process import WorkerProcess
from tests.integrations.conftest import ClientOf


def test_history_keeps_messages_as_they_went_in_and_clears(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    history = MemwellChatMessageHistory(client, user_id=ids["user"], session_id=ids["session"])
    assert history.messages == []
    sent = [
        SystemMessage("You are terse."),
        HumanMessage("What's the weather in Lisbon?", id="h1"),
        AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Lisbon"}, "id": "c1"}]),
        ToolMessage("Sunny, 24C", tool_call_id="c1"),
        AIMessage("Sunny and 24C."),
    ]
    history.add_messages(sent[:2])
    history.add_messages(sent[2:])
    assert history.messages == sent
    # They are the session's turns, with the roles the pipeline reads.
    turns = client.transcript(user_id=ids["user"], session_id=ids["session"]).turns
    assert [t.role for t in turns] == ["system", "user", "assistant", "tool", "assistant"]
    assert turns[2].content == "(calls tools: weather)"

    assert asyncio.run(history.aget_messages()) == sent
    history.clear()
    assert history.messages == []


def test_history_reads_turns_other_doors_sent(
    client: memwell.MemoryClient, ids: dict[str, str]
) -> None:
    client.add_turns(
        [
            {"user_id": ids["user"], "session_id": ids["session"], "content": "Hi", "id": "o1"},
            {"user_id": ids["user"], "session_id": ids["session"], "content": "Hello!",
             "role": "assistant", "id": "o2"},
        ]
    )  # fmt: skip
    history = MemwellChatMessageHistory(client, user_id=ids["user"], session_id=ids["session"])
    assert [(type(m).__name__, m.content) for m in history.messages] == [
        ("HumanMessage", "Hi"),
        ("AIMessage", "Hello!"),
    ]


def test_the_retriever_finds_what_the_history_consolidated(
    client: memwell.MemoryClient, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    user = ids["user"]
    history = MemwellChatMessageHistory(client, user_id=user, session_id=ids["session"])
    history.add_user_message("My sister Ana lives in Porto and she teaches chemistry.")
    turns = client.transcript(user_id=user, session_id=ids["session"]).turns
    client.wait_for_turns([t.turn_id for t in turns], timeout=90)

    retriever = MemwellRetriever(client=client, user_id=user, k=3)
    docs = retriever.invoke("Where does Ana live?")
    assert docs and "Porto" in docs[0].page_content
    parts = docs[0].metadata
    assert parts["score"] > 0 and parts["similarity"] is not None and parts["id"] == docs[0].id
    assert turns[0].turn_id in parts["source_turn_ids"]
    assert asyncio.run(retriever.ainvoke("Where does Ana live?"))[0].id == docs[0].id
    client.add_memory(user_id=user, content="Ana lives near the river.", metadata={"from": "crm"})
    filtered = MemwellRetriever(
        client=client, user_id=user, filters={"metadata": {"from": "crm"}}
    ).invoke("Where does Ana live?")
    assert [d.page_content for d in filtered] == ["Ana lives near the river."]


def test_a_tenant_never_sees_another_tenants_history_or_memories(
    client_of: ClientOf, ids: dict[str, str]
) -> None:
    user, sid = ids["user"], ids["session"]
    mine, theirs = client_of(ids["tenant"]), client_of(ids["tenant"] + "-b")
    history = MemwellChatMessageHistory(mine, user_id=user, session_id=sid)
    history.add_user_message("My PIN is 4711.")
    mine.add_memory(user_id=user, content="The user's PIN is 4711.")
    other = MemwellChatMessageHistory(theirs, user_id=user, session_id=sid)
    assert other.messages == []
    assert MemwellRetriever(client=theirs, user_id=user).invoke("What is the PIN?") == []
    other.clear()
    assert len(history.messages) == 1
