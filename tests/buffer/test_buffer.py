"""The short-term buffer against a real Redis-compatible server, and the token counter."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TypeVar

import pytest
import redis
import redis.asyncio
from hypothesis import given, settings
from hypothesis import strategies as st

from memwell.buffer.session_buffer import (
    BufferedTurn,
    BufferSnapshot,
    SessionBuffer,
    SyncSessionBuffer,
    buffer_key,
    summary_key,
    tokens_key,
    user_key_pattern,
)
from memwell.core.tokens import EstimatingTokenCounter, count_tokens

T = TypeVar("T")

TTL_S = 600


def _id() -> str:
    return uuid.uuid4().hex


def turn(tokens: int, content: str = "") -> BufferedTurn:
    return BufferedTurn(
        turn_id=_id(),
        role="user",
        content=content or f"turn with {tokens} tokens",
        created_at="2025-01-01T00:00:00+00:00",
        tokens=tokens,
    )


def with_buffer(
    url: str, budget: int, body: Callable[[SessionBuffer], Awaitable[T]], ttl_s: int = TTL_S
) -> T:
    """Runs `body` against a fresh async client (sync tests, no pytest-asyncio)."""

    async def main() -> T:
        client = redis.asyncio.Redis.from_url(url)
        try:
            return await body(SessionBuffer(client, token_budget=budget, ttl_s=ttl_s))
        finally:
            await client.aclose()

    return asyncio.run(main())


@pytest.fixture
def sync_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        yield client
    finally:
        client.close()


def model_append(
    kept: list[BufferedTurn], new: Sequence[BufferedTurn], budget: int
) -> tuple[list[BufferedTurn], list[BufferedTurn]]:
    """The specified eviction rule in plain Python: (remaining, evicted)."""
    remaining = [*kept, *new]
    evicted: list[BufferedTurn] = []
    while sum(t.tokens for t in remaining) > budget and len(remaining) > 1:
        evicted.append(remaining.pop(0))
    return remaining, evicted


def assert_consistent(snap: BufferSnapshot, budget: int) -> None:
    assert snap.total_tokens == sum(t.tokens for t in snap.turns)
    assert snap.total_tokens <= budget or len(snap.turns) == 1


# --- eviction --------------------------------------------------------------------------


def test_eviction_respects_budget_and_evicts_oldest_first(redis_url: str) -> None:
    budget = 100
    sizes = [30, 20, 50, 10, 40, 5, 70, 25, 100, 1, 60, 3, 0, 99]
    ids = (_id(), _id(), _id())

    async def body(buf: SessionBuffer) -> None:
        kept: list[BufferedTurn] = []
        evicted_so_far: list[BufferedTurn] = []
        for size in sizes:
            new = turn(size)
            evicted = await buf.append(*ids, [new])
            kept, expected_evicted = model_append(kept, [new], budget)
            snap = await buf.read(*ids)

            assert evicted == expected_evicted
            assert snap.turns == kept
            assert snap.turns[-1] == new
            assert_consistent(snap, budget)
            evicted_so_far += evicted
        # Nothing lost, nothing duplicated, order preserved end to end.
        assert [t.tokens for t in evicted_so_far + kept] == sizes

    with_buffer(redis_url, budget, body)


def test_single_turn_over_budget_is_kept_alone(redis_url: str) -> None:
    ids = (_id(), _id(), _id())

    async def body(buf: SessionBuffer) -> None:
        small = [turn(10), turn(20)]
        assert await buf.append(*ids, small) == []
        big = turn(500)
        assert await buf.append(*ids, [big]) == small
        snap = await buf.read(*ids)
        assert snap.turns == [big]
        assert snap.total_tokens == 500
        # The next turn pushes the oversized one out.
        after = turn(5)
        assert await buf.append(*ids, [after]) == [big]
        assert (await buf.read(*ids)).turns == [after]

    with_buffer(redis_url, 50, body)


def test_batch_append_evicts_correctly(redis_url: str) -> None:
    budget = 100
    ids = (_id(), _id(), _id())

    async def body(buf: SessionBuffer) -> None:
        first = [turn(40), turn(40), turn(10)]
        assert await buf.append(*ids, first) == []

        second = [turn(30), turn(30), turn(30)]
        assert await buf.append(*ids, second) == first[:2]
        snap = await buf.read(*ids)
        assert snap.turns == [first[2], *second]
        assert snap.total_tokens == 100

        # A batch bigger than the budget evicts into itself but keeps its newest turn.
        third = [turn(60), turn(70)]
        assert await buf.append(*ids, third) == [first[2], *second, third[0]]
        snap = await buf.read(*ids)
        assert snap.turns == [third[1]]
        assert snap.total_tokens == 70

        assert await buf.append(*ids, []) == []

    with_buffer(redis_url, budget, body)


def test_concurrent_appends_keep_the_invariant(redis_url: str) -> None:
    budget = 120
    ids = (_id(), _id(), _id())
    batches = [[turn(5 + (i * 7) % 40), turn((i * 13) % 50)] for i in range(20)]

    async def body(buf: SessionBuffer) -> None:
        appends = asyncio.gather(*(buf.append(*ids, b) for b in batches))
        # Reads racing the appends must each see a consistent list and total.
        reads = asyncio.gather(*(buf.read(*ids) for _ in batches))
        results, snaps = await asyncio.gather(appends, reads)
        for seen in snaps:
            assert_consistent(seen, budget)
        snap = await buf.read(*ids)
        assert_consistent(snap, budget)
        assert snap.turns, "the newest turn is always kept"

        all_ids = [t.turn_id for b in batches for t in b]
        evicted_ids = [t.turn_id for ev in results for t in ev]
        kept_ids = [t.turn_id for t in snap.turns]
        # Every turn is either evicted exactly once or still buffered, never both.
        assert sorted(evicted_ids + kept_ids) == sorted(all_ids)
        assert len(set(evicted_ids)) == len(evicted_ids)
        # Each batch is pushed atomically, so its turns stay adjacent and in order.
        for b in batches:
            if b[0].turn_id in kept_ids and b[1].turn_id in kept_ids:
                assert kept_ids.index(b[1].turn_id) == kept_ids.index(b[0].turn_id) + 1

    with_buffer(redis_url, budget, body)


def test_total_recovers_when_one_key_is_lost(sync_client: redis.Redis) -> None:
    ids = (_id(), _id(), _id())
    buf = SyncSessionBuffer(sync_client, token_budget=100, ttl_s=TTL_S)
    first = [turn(40), turn(40)]
    buf.append(*ids, first)
    sync_client.delete(tokens_key(*ids))  # e.g. maxmemory evicted just this key

    newest = turn(30)
    assert buf.append(*ids, [newest]) == first[:1]
    snap = buf.read(*ids)
    assert snap.turns == [first[1], newest]
    assert snap.total_tokens == 70

    sync_client.delete(buffer_key(*ids))  # and the other way round: a stale total
    alone = turn(20)
    assert buf.append(*ids, [alone]) == []
    assert buf.read(*ids).total_tokens == 20


# --- keys ------------------------------------------------------------------------------


def test_ids_with_separators_do_not_collide(redis_url: str) -> None:
    triples = [
        ("a:b", "c", "s"),
        ("a", "b:c", "s"),
        ("a", "b", "c:s"),
        ("a:b:c", "", "s"),
        ("a%3Ab", "c", "s"),
        ("a}", "{b", "s"),
    ]
    keys = {buffer_key(*t) for t in triples}
    assert len(keys) == len(triples)

    tenant_salt = _id()
    salted = [(tenant_salt + t, u, s) for t, u, s in triples]

    async def body(buf: SessionBuffer) -> None:
        for i, ids in enumerate(salted):
            await buf.append(*ids, [turn(i + 1)])
        for i, ids in enumerate(salted):
            snap = await buf.read(*ids)
            assert [t.tokens for t in snap.turns] == [i + 1]

    with_buffer(redis_url, 1000, body)


@given(st.tuples(st.text(), st.text(), st.text()), st.tuples(st.text(), st.text(), st.text()))
def test_keys_are_injective(a: tuple[str, str, str], b: tuple[str, str, str]) -> None:
    for key in (buffer_key, tokens_key, summary_key):
        assert (key(*a) == key(*b)) == (a == b)
    assert len({buffer_key(*a), tokens_key(*a), summary_key(*a)}) == 3


def test_user_pattern_with_glob_chars_matches_only_that_user(sync_client: redis.Redis) -> None:
    tenant = _id()
    target = "u*[1]?"
    others = ["u1", "u*[1]?x", "ux[1]y", "u", "u*", "u*[1]?:s", "u\\*[1]?"]
    buf = SyncSessionBuffer(sync_client, token_budget=100, ttl_s=TTL_S)
    for user in [target, *others]:
        for session in ("s1", "s:2"):
            buf.append(tenant, user, session, [turn(1)])
    buf.set_summary(tenant, target, "s1", "summary")

    found = set(sync_client.scan_iter(match=user_key_pattern(tenant, target), count=1000))
    expected = {
        buffer_key(tenant, target, "s1"),
        tokens_key(tenant, target, "s1"),
        summary_key(tenant, target, "s1"),
        buffer_key(tenant, target, "s:2"),
        tokens_key(tenant, target, "s:2"),
    }
    assert found == expected


# --- ttl, summary, clear, sync interop, erasure ----------------------------------------


def test_ttl_is_set_and_refreshed_on_all_keys(sync_client: redis.Redis, redis_url: str) -> None:
    ids = (_id(), _id(), _id())
    ttl_s = 300

    async def body(buf: SessionBuffer) -> None:
        await buf.append(*ids, [turn(3)])
        for key in (buffer_key(*ids), tokens_key(*ids)):
            assert 0 < sync_client.ttl(key) <= ttl_s

        await buf.set_summary(*ids, "older turns, summarised")
        sync_client.expire(summary_key(*ids), 5)
        sync_client.expire(buffer_key(*ids), 5)
        await buf.append(*ids, [turn(4)])
        for key in (buffer_key(*ids), tokens_key(*ids), summary_key(*ids)):
            assert 5 < sync_client.ttl(key) <= ttl_s

    with_buffer(redis_url, 100, body, ttl_s=ttl_s)


def test_summary_round_trip_and_clear(redis_url: str) -> None:
    ids = (_id(), _id(), _id())

    async def body(buf: SessionBuffer) -> None:
        empty = await buf.read(*ids)
        assert empty == BufferSnapshot(turns=[], total_tokens=0, summary=None)

        summary = "User likes tea 🍵; lives in Zürich.\nSecond line."
        await buf.set_summary(*ids, summary)
        await buf.append(*ids, [turn(7)])
        snap = await buf.read(*ids)
        assert snap.summary == summary
        assert snap.total_tokens == 7

        assert await buf.clear(*ids) == 3
        assert await buf.read(*ids) == BufferSnapshot(turns=[], total_tokens=0, summary=None)
        assert await buf.clear(*ids) == 0

    with_buffer(redis_url, 100, body)


def test_sync_buffer_sees_async_writes_and_erases_one_user(
    redis_url: str, sync_client: redis.Redis
) -> None:
    tenant, alice, bob = _id(), _id(), _id()
    written = [turn(5, "hello"), turn(6, "naïve café, 東京 and a lone \ud800 surrogate")]

    async def body(buf: SessionBuffer) -> None:
        for session in ("s1", "s2", "s3"):
            await buf.append(tenant, alice, session, written)
            await buf.set_summary(tenant, alice, session, f"summary of {session}")
        await buf.append(tenant, bob, "s1", written)
        await buf.append(_id(), alice, "s1", written)  # same user id, other tenant

    with_buffer(redis_url, 100, body)

    sync = SyncSessionBuffer(sync_client, token_budget=100, ttl_s=TTL_S)
    snap = sync.read(tenant, alice, "s2")
    assert snap.turns == written
    assert snap.total_tokens == 11
    assert snap.summary == "summary of s2"

    assert sync.erase_user(tenant, alice) == 9
    for session in ("s1", "s2", "s3"):
        assert sync.read(tenant, alice, session) == BufferSnapshot([], 0, None)
    assert sync.read(tenant, bob, "s1").turns == written
    assert sync.erase_user(tenant, alice) == 0


def test_erase_user_deletes_in_batches(sync_client: redis.Redis) -> None:
    tenant, user = _id(), _id()
    buf = SyncSessionBuffer(sync_client, token_budget=100, ttl_s=TTL_S)
    pipe = sync_client.pipeline(transaction=False)
    for i in range(600):  # more keys than one delete batch
        pipe.set(buffer_key(tenant, user, f"s{i}"), "x")
        pipe.set(tokens_key(tenant, user, f"s{i}"), "1")
    pipe.execute()
    assert buf.erase_user(tenant, user) == 1200
    assert list(sync_client.scan_iter(match=user_key_pattern(tenant, user))) == []


def test_make_turn_counts_tokens_and_json_round_trips(sync_client: redis.Redis) -> None:
    buf = SyncSessionBuffer(sync_client, token_budget=100, ttl_s=TTL_S)
    made = buf.make_turn(
        turn_id="t1", role="assistant", content="Hello, world!", created_at="2025-01-01T00:00:00Z"
    )
    assert made.tokens == count_tokens("Hello, world!") == 4
    assert BufferedTurn.from_json(made.to_json()) == made
    assert made.to_json().startswith('{"tokens":4,')
    with pytest.raises(ValueError):
        turn(-1)


@given(st.text(alphabet=st.characters(exclude_categories=())), st.integers(0, 10**9))
def test_turn_json_round_trips_any_text(content: str, tokens: int) -> None:
    t = BufferedTurn(turn_id=content, role=content, content=content, created_at="x", tokens=tokens)
    encoded = t.to_json()
    encoded.encode("utf-8")  # always sendable to Redis
    assert BufferedTurn.from_json(encoded) == t


def test_constructor_rejects_nonsense_configuration(sync_client: redis.Redis) -> None:
    with pytest.raises(ValueError):
        SyncSessionBuffer(sync_client, token_budget=0, ttl_s=TTL_S)
    with pytest.raises(ValueError):
        SyncSessionBuffer(sync_client, token_budget=10, ttl_s=0)


# --- token counter ---------------------------------------------------------------------

# cl100k_base counts. The first six are common-word English; "tiktoken is great!",
# "2 + 2 = 4" and the Japanese line are the examples from OpenAI's tiktoken cookbook.
CL100K_COUNTS = [
    ("The quick brown fox jumps over the lazy dog.", 10),
    ("Hello, world!", 4),
    ("tiktoken is great!", 6),
    ("Please remind me to call my mother tomorrow morning.", 10),
    ("Can you help me write an email to my landlord about the broken heater?", 15),
    ("The meeting has been moved to Thursday at 3 PM.", 12),
    ("2 + 2 = 4", 7),
    ("お誕生日おめでとう", 9),
]


@pytest.mark.parametrize(("text", "expected"), CL100K_COUNTS)
def test_estimate_is_within_35_percent_of_cl100k(text: str, expected: int) -> None:
    assert abs(count_tokens(text) - expected) <= 0.35 * expected


def test_estimate_grows_with_text_of_the_same_kind() -> None:
    sentence = "The quick brown fox jumps over the lazy dog. "
    counts = [count_tokens(sentence * n) for n in range(1, 30)]
    assert counts == sorted(counts)
    assert counts[9] >= 9 * counts[0]  # roughly linear, not saturating
    assert count_tokens("") == 0
    assert count_tokens("word") < count_tokens("a considerably longer sentence of words")


@given(st.text(alphabet=st.characters(exclude_categories=())))
@settings(max_examples=300)
def test_counter_never_raises(text: str) -> None:
    n = EstimatingTokenCounter().count(text)
    assert isinstance(n, int)
    assert n >= (1 if text else 0)


@given(st.text(), st.text())
def test_appending_text_never_lowers_the_count(a: str, b: str) -> None:
    assert count_tokens(a + b) >= count_tokens(a)


def test_counter_handles_odd_strings() -> None:
    for odd in ["\x00", "\x00" * 1000, "🍵" * 50, "👨‍👩‍👧", "e\u0301", " " * 10_000, "\ud800"]:
        assert count_tokens(odd) >= 1


# --- removal of named turns ------------------------------------------------------------


def test_removing_named_turns_keeps_the_total_and_ttl_in_step(
    redis_url: str, sync_client: redis.Redis
) -> None:
    ids = (_id(), _id(), _id())
    first, doomed, last, other = turn(30), turn(5), turn(10), turn(10)

    async def body(buf: SessionBuffer) -> None:
        await buf.append(*ids, [first, doomed, last])
        assert await buf.remove(*ids, [doomed.turn_id, "not-buffered"]) == 1
        snap = await buf.read(*ids)
        assert snap.turns == [first, last] and snap.total_tokens == 40
        assert 0 < sync_client.ttl(tokens_key(*ids)) <= TTL_S
        # The budget counts from the recounted total: 40 + 10 fits in 50, nothing evicted
        # (a stale 45 would have evicted the oldest).
        assert await buf.append(*ids, [other]) == []
        assert (await buf.read(*ids)).total_tokens == 50
        # Removing every turn leaves no list and no total behind.
        gone = [first.turn_id, last.turn_id, other.turn_id]
        assert await buf.remove(*ids, gone) == 3
        assert await buf.read(*ids) == BufferSnapshot(turns=[], total_tokens=0, summary=None)
        assert not sync_client.exists(buffer_key(*ids), tokens_key(*ids))
        assert await buf.remove(*ids, gone) == 0

    with_buffer(redis_url, 50, body)
