"""The model server killed (-9) while a batch of turns is being consolidated through it:
`memwell up` starts it again, and every turn ends processed, once: none lost, none
written twice."""

from __future__ import annotations

import os
import signal
import time

import httpx
import psutil
import pytest

from memwell.llm.model_server import probe_model_server
from memwell.local.waiting import wait_for
from tests.real_llm.conftest import (
    CONSOLIDATION_TIMEOUT_S,
    LlmStack,
    elapsed,
    new_user,
    wait_processed,
)

# A real model on a small CPU: minutes, not the default run's 300 s per test.
pytestmark = [pytest.mark.real_llm, pytest.mark.timeout(1800)]

TURNS = [
    "I grew up in Aveiro, by the lagoon.",
    "My first job was at a bakery on Rua Direita.",
    "I have two cats, Miso and Tofu.",
    "I run ten kilometres every Sunday morning.",
    "My favourite book is Blindness by Saramago.",
    "I'm learning to play the cello.",
    "My partner Joana is a structural engineer.",
    "We are planning a trip to Japan in October.",
]


def _serving_a_request(pid: int, port: int) -> bool:
    """True while a client holds a connection to the server: a call is under way."""
    try:
        connections = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.NoSuchProcess:
        return False
    return any(
        c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == port
        for c in connections
    )


def test_a_killed_model_server_comes_back_and_no_turn_is_lost_or_doubled(
    llm_stack: LlmStack,
) -> None:
    user = new_user()
    pid = llm_stack.server_pid()
    base_url = httpx.get(f"{llm_stack.api_url}/readyz", timeout=10).json()["model_server"]["url"]
    port = int(base_url.rsplit(":", 1)[1].split("/")[0])
    turns = [{"user_id": user, "session_id": "life", "content": c} for c in TURNS]
    accepted = httpx.post(f"{llm_stack.api_url}/v1/turns", json={"turns": turns}, timeout=60)
    assert accepted.status_code == 202, accepted.text
    turn_ids: list[str] = accepted.json()["turn_ids"]

    wait_for(lambda: _serving_a_request(pid, port), timeout=CONSOLIDATION_TIMEOUT_S,
             interval=0.05, what="a model call for the batch")  # fmt: skip
    os.killpg(pid, signal.SIGKILL)
    killed = time.monotonic()
    pending = llm_stack.query(
        "SELECT count(*) FROM turns WHERE id = ANY(%s) AND status = 'pending'", turn_ids
    )[0][0]
    assert pending > 0  # the kill landed mid-ingest

    wait_for(lambda: probe_model_server(base_url).up and llm_stack.server_pid() != pid,
             timeout=300, interval=0.5, what="the model server to be restarted")  # fmt: skip
    print(f"model server back in {elapsed(killed)}")
    statuses = wait_processed(llm_stack.api_url, turn_ids, CONSOLIDATION_TIMEOUT_S)
    assert set(statuses.values()) == {"processed"}, statuses

    rows = llm_stack.query("SELECT id, count(*) FROM turns WHERE user_id = %s GROUP BY id", user)
    assert sorted(r[0] for r in rows) == sorted(turn_ids) and all(r[1] == 1 for r in rows)
    memories = llm_stack.query(
        "SELECT content_hash, source_turn_ids FROM memories "
        "WHERE user_id = %s AND deleted_at IS NULL AND superseded_by IS NULL",
        user,
    )
    assert memories
    hashes = [m[0] for m in memories]
    assert len(hashes) == len(set(hashes))  # nothing written twice
    assert all(set(m[1]) <= set(turn_ids) for m in memories)
