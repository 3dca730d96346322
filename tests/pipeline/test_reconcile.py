"""Reconcile, consolidate, summaries and dead letters as plain functions against the
real Postgres and the real local embedder (no worker needed here)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import Settings
from memwell.db.models import ChatSession, DeadLetter, Memory, MemoryEvent, Turn
from memwell.embeddings import Embedder, build_embedder
from memwell.embeddings.base import FloatMatrix
from memwell.intake.dead_letters import list_dead_letters, record_dead_letter, replay_dead_letters
from memwell.intake.persist import persist_turns
from memwell.intake.turns import IngestPayload, TurnIn
from memwell.pipeline import reconcile
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.consolidate import (
    Analysis,
    ConsolidationConfig,
    LocalAnalyzer,
    consolidate_pending,
)
from memwell.pipeline.extract import TurnView
from memwell.pipeline.reconcile import ReconcilePolicy, reconcile_batch
from memwell.pipeline.summarize import (
    LocalSummarizer,
    TurnsNotPersisted,
    close_session,
    fold_into_summary,
)

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


class CountingEmbedder:
    """The real embedder, with a record of the batch sizes it was asked for."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.calls: list[int] = []

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        self.calls.append(len(texts))
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def embedder(stack_env: dict[str, str]) -> Embedder:
    return build_embedder(Settings(embedding_provider="local"))


def _candidate(ids: dict[str, str], content: str, turn: str, minutes: int = 0) -> Candidate:
    return Candidate(
        tenant=ids["tenant"],
        user_id=ids["user"],
        session_id=ids["session"],
        kind="fact",
        content=content,
        importance=0.6,
        event_time=T0 + timedelta(minutes=minutes),
        source_turn_ids=[turn],
    )


def _store(db: sessionmaker[Session], embedder: Embedder, cands: list[Candidate]) -> dict[str, int]:
    with db.begin() as session:
        vectors = embedder.embed([c.content for c in cands])
        report = reconcile_batch(
            session, cands, vectors, embedding_model=embedder.model_name, policy=ReconcilePolicy()
        )
    return {"added": report.added, "merged": report.merged, "superseded": report.superseded}


def _memories(db: sessionmaker[Session], tenant: str) -> list[Memory]:
    with db() as session:
        return list(
            session.scalars(
                select(Memory).where(Memory.tenant == tenant).order_by(Memory.created_at)
            )
        )


def test_paraphrase_merges_and_changed_fact_supersedes_with_history(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    tenant = ids["tenant"]
    _store(db, embedder, [_candidate(ids, "Ada lives in Berlin.", "t1")])
    _store(db, embedder, [_candidate(ids, "Ada enjoys hiking in the Alps.", "t2", 1)])
    merged = _store(
        db, embedder, [_candidate(ids, "Ada really enjoys hiking in the Alps.", "t3", 2)]
    )
    superseded = _store(db, embedder, [_candidate(ids, "Ada moved to Lisbon.", "t4", 3)])
    assert merged["merged"] == 1 and superseded["superseded"] == 1

    rows = {m.content: m for m in _memories(db, tenant)}
    hiking = rows["Ada really enjoys hiking in the Alps."]  # the better-written text
    assert sorted(hiking.source_turn_ids) == ["t2", "t3"]
    old, new = rows["Ada lives in Berlin."], rows["Ada moved to Lisbon."]
    assert old.superseded_by == new.id and old.valid_to == T0 + timedelta(minutes=3)
    assert new.superseded_by is None and new.valid_to is None
    assert len(rows) == 3
    with db() as session:
        history = session.execute(
            select(MemoryEvent.event, MemoryEvent.old_content, MemoryEvent.new_content)
            .where(MemoryEvent.tenant == tenant, MemoryEvent.memory_id == old.id)
            .order_by(MemoryEvent.id)
        ).all()
    assert [tuple(h) for h in history] == [
        ("add", None, "Ada lives in Berlin."),
        ("supersede", "Ada lives in Berlin.", "Ada moved to Lisbon."),
    ]


def test_different_numbers_never_merge(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    _store(db, embedder, [_candidate(ids, "Ada's gate code is 4411.", "t1")])
    report = _store(db, embedder, [_candidate(ids, "Ada's gate code is 4412.", "t2", 1)])
    assert report["added"] == 1 and len(_memories(db, ids["tenant"])) == 2


def test_one_batch_sees_its_own_writes_in_order(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    """The batch's writes are applied together at its end: a later candidate must still
    see an earlier one's add, supersession and freed content hash."""
    report = _store(
        db,
        embedder,
        [
            _candidate(ids, "Ada lives in Berlin.", "t1"),
            _candidate(ids, "Ada moved to Lisbon.", "t2", 1),
            _candidate(ids, "Ada lives in Berlin.", "t3", 2),
            _candidate(ids, "Ada lives in Berlin.", "t4", 3),
        ],
    )
    assert report == {"added": 1, "merged": 0, "superseded": 2}
    rows = _memories(db, ids["tenant"])
    live = [m for m in rows if m.superseded_by is None]
    assert [m.content for m in rows] == [
        "Ada lives in Berlin.",
        "Ada moved to Lisbon.",
        "Ada lives in Berlin.",
    ]
    assert len(live) == 1 and sorted(live[0].source_turn_ids) == ["t3", "t4"]
    assert live[0].reinforcement_count == 1
    assert rows[0].superseded_by == rows[1].id and rows[1].superseded_by == live[0].id


def test_a_row_added_outside_the_lock_makes_the_plan_replan(
    db: sessionmaker[Session],
    embedder: Embedder,
    ids: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer that skips the advisory lock (a session summary) can add the same
    content between the batch's read and its insert: the insert then hits the
    live-hash index, and the batch re-plans instead of failing."""
    _store(db, embedder, [_candidate(ids, "Ada keeps bees.", "t1")])
    real = reconcile.fetch_live_hashes
    calls: list[int] = []

    def blind_once(*args: Any) -> Any:
        calls.append(1)
        return {} if len(calls) == 1 else real(*args)

    monkeypatch.setattr(reconcile, "fetch_live_hashes", blind_once)
    report = _store(db, embedder, [_candidate(ids, "Ada keeps bees!", "t2", 1)])
    assert len(calls) == 2 and report["added"] == 0
    (memory,) = _memories(db, ids["tenant"])
    assert memory.reinforcement_count == 1 and sorted(memory.source_turn_ids) == ["t1", "t2"]


def test_two_workers_reconciling_near_duplicates_make_one_memory(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    texts = ["Ada adores hiking in the Alps.", "Ada really adores hiking in the Alps."]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            cand = _candidate(ids, texts[i], f"t{i}", i)
            vectors = embedder.embed([cand.content])
            with db.begin() as session:
                barrier.wait(timeout=10)  # both transactions open before either reconciles
                reconcile_batch(
                    session,
                    [cand],
                    vectors,
                    embedding_model=embedder.model_name,
                    policy=ReconcilePolicy(),
                )
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    live = [m for m in _memories(db, ids["tenant"]) if m.superseded_by is None]
    assert len(live) == 1
    assert sorted(live[0].source_turn_ids) == ["t0", "t1"]


def _persist(db: sessionmaker[Session], ids: dict[str, str], contents: list[str]) -> list[str]:
    turns = [
        TurnIn(
            id=f"{ids['session']}-{i}",
            user_id=ids["user"],
            session_id=ids["session"],
            content=c,
            created_at=T0 + timedelta(minutes=i),
            metadata={"speaker": "Ada"},
        )
        for i, c in enumerate(contents)
    ]
    with db.begin() as session:
        persist_turns(session, IngestPayload(tenant=ids["tenant"], turns=turns))
    return [t.id for t in turns]


def test_a_lone_turn_is_topped_up_into_one_batch_and_rerun_is_a_noop(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    contents = [f"I visited museum number {i} in Paris with my sister." for i in range(10)]
    turn_ids = _persist(db, ids, contents)
    counting = CountingEmbedder(embedder)
    config = ConsolidationConfig(batch_size=64, linger_s=0.0)
    with db.begin() as session:
        report = consolidate_pending(
            session, counting, tenant=ids["tenant"], turn_ids=turn_ids[:1], config=config
        )
    assert report.turns >= 10  # the task named one turn; the batch took the queue behind it
    assert counting.calls[0] >= 10
    with db() as session:
        stored = session.scalars(
            select(Turn).where(Turn.tenant == ids["tenant"], Turn.id.in_(turn_ids))
        ).all()
    assert {t.status for t in stored} == {"processed"}
    assert all(t.importance is not None and 0 < t.importance <= 1 for t in stored)
    before = [(m.id, m.content, m.reinforcement_count) for m in _memories(db, ids["tenant"])]
    assert len(before) == 10 and all(m[1].startswith("Ada visited museum") for m in before)
    with db.begin() as session:
        consolidate_pending(
            session, counting, tenant=ids["tenant"], turn_ids=turn_ids, config=config
        )
    # (Other tests' pending turns may be claimed by the top-up; ours are not re-done.)
    after = [(m.id, m.content, m.reinforcement_count) for m in _memories(db, ids["tenant"])]
    assert before == after


def test_running_summary_folds_once_and_close_leaves_a_summary_memory(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    turn_ids = _persist(
        db,
        ids,
        [
            "I adopted a puppy named Biscuit last week.",
            "Haha ok.",
            "I started a new job at the hospital as a counselor.",
            "My sister is visiting from Boston next month.",
        ],
    )
    summarizer = LocalSummarizer(budget_tokens=200, threshold=0.35)
    key = {"tenant": ids["tenant"], "user_id": ids["user"], "session_id": ids["session"]}
    with db.begin() as session, pytest.raises(TurnsNotPersisted):
        fold_into_summary(session, summarizer, turn_ids=["not-stored-yet"], **key)
    with db.begin() as session:
        first = fold_into_summary(session, summarizer, turn_ids=turn_ids[:2], **key)
    with db.begin() as session:
        again = fold_into_summary(session, summarizer, turn_ids=turn_ids[:2], **key)
    assert first.folded == 2 and again.folded == 0 and again.summary == first.summary
    assert first.summary is not None and "Ada adopted a puppy named Biscuit" in first.summary

    with db.begin() as session:
        memory_id = close_session(session, embedder, summarizer, **key)
    with db.begin() as session:
        twice = close_session(session, embedder, summarizer, **key)
    assert memory_id is not None and twice == memory_id
    with db() as session:
        memory = session.get(Memory, memory_id)
        chat = session.get(ChatSession, (ids["tenant"], ids["user"], ids["session"]))
    assert memory is not None and memory.kind == "summary"
    assert "counselor" in memory.content and "Biscuit" in memory.content
    assert (
        set(memory.source_turn_ids) <= set(turn_ids) and turn_ids[1] not in memory.source_turn_ids
    )
    assert chat is not None and chat.status == "closed" and chat.summary == memory.content


def test_dead_letters_list_and_replay_once(db: sessionmaker[Session], ids: dict[str, str]) -> None:
    with db.begin() as session:
        letter_id = record_dead_letter(
            session,
            task_name="memwell.consolidate_turns",
            payload={"tenant": ids["tenant"], "turn_ids": ["x"]},
            error="boom",
            tenant=ids["tenant"],
        )
    sent: list[tuple[str, dict[str, object]]] = []
    with db.begin() as session:
        assert letter_id in [d.id for d in list_dead_letters(session, limit=1000)]
        replayed = replay_dead_letters(session, lambda n, k: sent.append((n, k)), ids=[letter_id])
    with db.begin() as session:
        replayed_again = replay_dead_letters(
            session, lambda n, k: sent.append((n, k)), ids=[letter_id]
        )
        letter = session.get(DeadLetter, letter_id)
        open_ids = [d.id for d in list_dead_letters(session, limit=1000)]
    assert replayed == [letter_id] and replayed_again == []
    assert sent == [("memwell.consolidate_turns", {"tenant": ids["tenant"], "turn_ids": ["x"]})]
    assert letter is not None and letter.replayed_at is not None and letter_id not in open_ids


class _PoisonAnalyzer(LocalAnalyzer):
    """Local mode, except that it chokes on one turn: a stand-in for a poison input."""

    def importance(self, turn: TurnView) -> float:
        if "POISON" in turn.content:
            raise ValueError("cannot score this")
        return super().importance(turn)


def test_a_poison_turn_fails_alone_and_the_batch_goes_on(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    turn_ids = _persist(db, ids, ["POISON here", "I adopted a puppy named Biscuit."])
    with db.begin() as session:
        report = consolidate_pending(
            session,
            embedder,
            tenant=ids["tenant"],
            turn_ids=turn_ids,
            config=ConsolidationConfig(linger_s=0.0),
            analyzer=_PoisonAnalyzer(threshold=0.35),
        )
    with db() as session:
        rows = {
            t.id: t
            for t in session.scalars(
                select(Turn).where(Turn.tenant == ids["tenant"], Turn.id.in_(turn_ids))
            )
        }
    # The error's kind, never its message: that may quote the turn.
    assert (rows[turn_ids[0]].status, rows[turn_ids[0]].error) == ("failed", "ValueError")
    assert rows[turn_ids[1]].status == "processed"
    assert report.memories_added >= 1
    assert [m.content for m in _memories(db, ids["tenant"])] == [
        "Ada adopted a puppy named Biscuit."
    ]


def _keyed(ids: dict[str, str], content: str, key: str, turn: str, minutes: int) -> Candidate:
    return replace(_candidate(ids, content, turn, minutes), metadata={"store_key": key})


def test_a_keyed_memory_is_never_merged_superseded_or_folded_into_another(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    """A store's keyed item changes only through its own key: reconcile leaves it out of
    merge and supersede as the target and as the candidate, within a batch too, and its
    exact duplicates are counted per key."""
    first = [
        _keyed(ids, "Ada lives in Berlin.", "A/k1", "t1", 0),
        _keyed(ids, "Ada enjoys hiking in the Alps.", "A/k2", "t2", 0),
    ]
    _store(db, embedder, first)
    # As the target: a changed fact and a paraphrase from outside the key, and a changed
    # fact after a keyed item written earlier in the same batch.
    as_target = _store(db, embedder, [
        _keyed(ids, "Ada works at Apple.", "C/k1", "t3", 1),
        _candidate(ids, "Ada moved to Lisbon.", "t4", 2),
        _candidate(ids, "Ada really enjoys hiking in the Alps.", "t5", 3),
        _candidate(ids, "Ada works at Google.", "t6", 4),
    ])  # fmt: skip
    # As the candidate: a changed fact, a paraphrase and the same text under other keys.
    as_candidate = _store(db, embedder, [
        _keyed(ids, "Ada moved to Porto.", "B/k1", "t7", 5),
        _keyed(ids, "Ada enjoys hiking in the Alps a lot.", "B/k2", "t8", 6),
        _keyed(ids, "Ada lives in Berlin.", "B/k3", "t9", 7),
    ])  # fmt: skip
    again = _store(db, embedder, [_keyed(ids, "Ada lives in Berlin.", "A/k1", "t10", 8)])

    assert as_target == {"added": 4, "merged": 0, "superseded": 0}
    assert as_candidate == {"added": 3, "merged": 0, "superseded": 0}
    assert again == {"added": 0, "merged": 0, "superseded": 0}  # reinforced its own key
    rows = _memories(db, ids["tenant"])
    assert all(m.superseded_by is None and m.deleted_at is None for m in rows)
    assert sorted((m.metadata_.get("store_key", ""), m.content) for m in rows) == [
        ("", "Ada moved to Lisbon."),
        ("", "Ada really enjoys hiking in the Alps."),
        ("", "Ada works at Google."),
        ("A/k1", "Ada lives in Berlin."),
        ("A/k2", "Ada enjoys hiking in the Alps."),
        ("B/k1", "Ada moved to Porto."),
        ("B/k2", "Ada enjoys hiking in the Alps a lot."),
        ("B/k3", "Ada lives in Berlin."),
        ("C/k1", "Ada works at Apple."),
    ]
    reinforced = {m.metadata_.get("store_key"): m.reinforcement_count for m in rows}
    assert reinforced["A/k1"] == 1 and reinforced["B/k3"] == 0


class _OutOfTimeAnalyzer(LocalAnalyzer):
    """Local mode that runs out of time after `reach` turns, as a slow model does."""

    reach: int = 2

    def analyze(self, turns: Sequence[TurnView], *, deadline: float | None) -> Analysis:
        analysis = Analysis()
        for turn in turns[: self.reach]:
            self.analyze_one(analysis, turn)
        return analysis


def test_turns_the_analysis_did_not_reach_stay_pending_and_come_back_deferred(
    db: sessionmaker[Session], embedder: Embedder, ids: dict[str, str]
) -> None:
    contents = [f"I visited museum number {i} in Paris with my sister." for i in range(5)]
    turn_ids = _persist(db, ids, contents)
    with db.begin() as session:
        report = consolidate_pending(
            session,
            embedder,
            tenant=ids["tenant"],
            turn_ids=turn_ids,
            config=ConsolidationConfig(linger_s=0.0),
            analyzer=_OutOfTimeAnalyzer(threshold=0.35),
        )
    with db() as session:
        status = dict(
            session.execute(select(Turn.id, Turn.status).where(Turn.tenant == ids["tenant"])).all()
        )
    assert report.turns == 2 and sorted(report.deferred) == sorted(turn_ids[2:])
    assert [status[t] for t in turn_ids] == ["processed"] * 2 + ["pending"] * 3
