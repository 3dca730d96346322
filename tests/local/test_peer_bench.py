"""The Memwell side of the peer bench (bench/peers) on a tiny LoCoMo-format slice: the
turns through the session's real worker, each question through `retrieve`, its hits
scored back to the turns they came from, and the interleaving that times every system
on the same questions. No peer package is needed."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.evals.locomo import Scores, ingest
from bench.harness.locomo_data import Conversation, Question, load
from bench.harness.locomo_store import LocomoStore
from bench.harness.stack import BenchStack
from bench.peers.measure import asks_of, interleaved
from bench.peers.memwell_side import memwell_system
from bench.peers.systems import Ingest
from bench.peers.vectors import VectorBook
from memwell.core.settings import get_settings
from memwell.local.worker_process import WorkerProcess

TURNS = [
    ("Ada", "I finally bought a cello and I practise every evening."),
    ("Ben", "That's lovely! My sister Clara just moved to Lisbon for work."),
    ("Ada", "Lisbon is beautiful. I hiked the Rota Vicentina trail last spring."),
    ("Ben", "I adopted a grey cat named Pixel from the shelter."),
]


def _slice(path: Path, sample: str) -> list[Conversation]:
    """One conversation of two sessions, and two questions with their evidence."""
    session = [{"speaker": s, "dia_id": f"D1:{i + 1}", "text": t} for i, (s, t) in enumerate(TURNS)]
    data = [
        {
            "sample_id": sample,
            "conversation": {
                "speaker_a": "Ada",
                "speaker_b": "Ben",
                "session_1": session[:2],
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_2": [dict(t, dia_id=f"D2:{i + 1}") for i, t in enumerate(session[2:])],
                "session_2_date_time": "3:10 pm on 20 May, 2023",
            },
            "qa": [
                {"question": "What instrument does Ada play?", "answer": "cello",
                 "evidence": ["D1:1"], "category": 4},
                {"question": "What is the name of Ben's cat?", "answer": "Pixel",
                 "evidence": ["D2:2"], "category": 4},
            ],
        }
    ]  # fmt: skip
    path.write_text(json.dumps(data), encoding="utf-8")
    return load(path)


class _Echo:
    """A system that answers with one fixed turn, recording who asked what, in order."""

    def __init__(self, name: str, calls: list[tuple[str, str]], hits: int) -> None:
        self.name, self.calls, self.hits = name, calls, hits
        self.database_url = ""
        self.postgres_pid = os.getpid()
        self.ingested = Ingest(turns=1, seconds=1.0)

    async def search(self, conv: Conversation, q: Question) -> Sequence[Any]:
        self.calls.append((self.name, q.text))
        return ["D1:1"] * self.hits

    def score(self, conv: Conversation, q: Question, hits: Sequence[Any], scores: Scores) -> None:
        scores.add(q, [{h} for h in hits], list(hits), len(hits))


def test_questions_alternate_between_conversations(tmp_path: Path) -> None:
    a = _slice(tmp_path / "a.json", "conv-a")[0]
    b = _slice(tmp_path / "b.json", "conv-b")[0]
    asked = [(c.sample_id, q.text) for c, q in asks_of([a, b], None)]
    assert [s for s, _ in asked] == ["conv-a", "conv-b", "conv-a", "conv-b"]
    assert len(asks_of([a, b], 1)) == 2


def test_every_system_answers_every_question_in_a_rotating_order(tmp_path: Path) -> None:
    conv = _slice(tmp_path / "c.json", "conv-c")[0]
    calls: list[tuple[str, str]] = []
    full, short = _Echo("full", calls, 10), _Echo("short", calls, 3)
    passes = asyncio.run(interleaved([full, short], asks_of([conv], None), warmup=1))
    timed = calls[2:]  # the warm-up question, asked of both, is not counted
    assert [name for name, _ in timed] == ["full", "short", "short", "full"]
    assert [p.searches for p in passes] == [2, 2]
    assert [p.short for p in passes] == [0, 2]
    assert passes[0].scores.summary([4]).r10 == 0.5  # D1:1 is one question's evidence


def test_the_book_hands_back_the_vectors_it_embedded() -> None:
    book = VectorBook(get_settings())
    book.add(["I play the cello."])
    held = book.embed(["I play the cello."])[0]
    fresh = book.embedder.embed(["I play the cello."])[0]
    assert float(held @ fresh) > 0.999
    asked = book.embed(["What instrument?", "I play the cello."])
    assert asked.shape == (2, book.dimensions)
    assert float(asked[1] @ held) > 0.999


def test_memwell_side_scores_its_hits_by_their_source_turns(
    tmp_path: Path, database_url: str, redis_url: str, worker: WorkerProcess
) -> None:
    conversations = _slice(tmp_path / "locomo.json", f"conv-{uuid.uuid4().hex[:8]}")
    seconds = ingest(conversations, database_url, redis_url)
    stack = BenchStack(database_url=database_url, redis_url=redis_url, root=tmp_path,
                       postgres_pid=os.getpid())  # fmt: skip
    store = LocomoStore(stack=stack, conversations=conversations, api_key="", memories={},
                        ingest_s=seconds)  # fmt: skip

    async def run() -> Scores:
        async with memwell_system(store, get_settings()) as system:
            assert system.ingested.turns == len(TURNS)
            passes = await interleaved([system], asks_of(conversations, None), warmup=0)
        assert passes[0].searches == 2
        assert passes[0].client_cpu_ms and all(ms > 0 for ms in passes[0].wall_ms)
        return passes[0].scores

    scores = asyncio.run(run())
    # Both answers are among four memories: the top 10 covers each one's evidence turn,
    # found through the memories' provenance ("{sample}:{dia id}").
    assert scores.summary([4]).r10 == 1.0
    assert scores.summary([4]).containment == 1.0
