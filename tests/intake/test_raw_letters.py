"""Dead letters of unreadable messages are bounded: each keeps at most the size cap of
the message (saying so, with its whole size and SHA-256), and past the bound of open
ones a new message is counted, not stored, until an operator discards them. The
defaults keep the whole of it small."""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import Settings, get_settings
from memwell.db.models import DeadLetter
from memwell.intake.dead_letters import RAW_BYTES_KEY, replayable
from memwell.intake.raw_letters import (
    discard_dead_letters,
    keep_raw_letter,
    open_raw_letters,
    raw_not_kept,
)
from memwell.local.cli import main
from memwell.local.session_services import PostgresService
from memwell.maintenance.status import StackStatus, read_store, render
from tests.support.maintenance_factories import isolated_database

CAP = 1024


@pytest.fixture
def ldb(postgres: PostgresService) -> Iterator[sessionmaker[Session]]:
    """A database of its own: the bound counts every open raw letter of the store."""
    with isolated_database(postgres, f"memwell_test_raw_{uuid.uuid4().hex[:8]}") as sessions:
        yield sessions


def _keep(sessions: sessionmaker[Session], raw: bytes, *, max_open: int = 10) -> int | None:
    with sessions.begin() as session:
        return keep_raw_letter(
            session, raw=raw, task_name="memwell.unreadable_message", error="not a message: x",
            details={"queue": "ingest"}, max_bytes=CAP, max_open=max_open,
        )  # fmt: skip


def test_a_large_message_is_kept_truncated_with_its_size_and_hash(
    ldb: sessionmaker[Session],
) -> None:
    raw = bytes(range(256)) * 40_000  # 10 MB
    letter_id = _keep(ldb, raw)
    assert letter_id is not None
    with ldb() as session:
        letter = session.get(DeadLetter, letter_id)
        stored = session.scalar(
            select(func.octet_length(text("payload::text"))).where(DeadLetter.id == letter_id)
        )
    assert letter is not None and stored is not None
    payload = letter.payload
    assert base64.b64decode(payload[RAW_BYTES_KEY]) == raw[:CAP]
    assert payload["truncated"] is True and payload["size_bytes"] == len(raw)
    assert payload["sha256"] == hashlib.sha256(raw).hexdigest()
    assert payload["queue"] == "ingest" and not replayable(payload)
    assert stored < CAP * 4 / 3 + 512  # the row holds the cap, not the message
    assert letter.error == (
        f"not a message: x; truncated: the first {CAP} of {len(raw)} bytes kept "
        f"(sha256 {payload['sha256']})"
    )


def test_a_small_message_is_kept_whole(ldb: sessionmaker[Session]) -> None:
    letter_id = _keep(ldb, b"[]")
    with ldb() as session:
        letter = session.get(DeadLetter, letter_id)
    assert letter is not None and letter.error == "not a message: x"
    assert base64.b64decode(letter.payload[RAW_BYTES_KEY]) == b"[]"
    assert (letter.payload["truncated"], letter.payload["size_bytes"]) == (False, 2)


def test_past_the_bound_messages_are_counted_until_discarded(
    ldb: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = [_keep(ldb, f"poison {n}".encode(), max_open=3) for n in range(10)]
    assert all(k is not None for k in kept[:3]) and kept[3:] == [None] * 7
    with ldb() as session:
        assert open_raw_letters(session) == 3
        not_kept = raw_not_kept(session)
    assert not_kept is not None and not_kept.count == 7
    assert not_kept.last_error == "not a message: x (8 bytes)"  # never the content
    status = StackStatus()
    read_store(status, ldb)
    assert (status.raw_letters_open, status.raw_letters_not_kept) == (3, 7)
    assert "  unreadable    3 open, 7 more not kept (at their bound)" in render(status)

    # The operator sees the count where they look for letters.
    monkeypatch.setenv("DATABASE_URL", str(ldb.kw["bind"].url.render_as_string(False)))
    get_settings.cache_clear()
    try:
        listed = CliRunner().invoke(main, ["dlq", "list"])
        assert listed.exit_code == 0, listed.output
        assert listed.output.splitlines()[0].startswith("7 unreadable messages not kept")
        discarded = CliRunner().invoke(main, ["dlq", "discard", "--raw"])
        assert discarded.exit_code == 0, discarded.output
        assert discarded.output.startswith("discarded 3:")
    finally:
        get_settings.cache_clear()
    with ldb() as session:
        assert open_raw_letters(session) == 0 and raw_not_kept(session) is None
    assert _keep(ldb, b"poison again", max_open=3) is not None  # room again


def test_discard_by_id_leaves_the_rest(ldb: sessionmaker[Session]) -> None:
    first, second = _keep(ldb, b"one"), _keep(ldb, b"two")
    assert first is not None and second is not None
    with ldb.begin() as session:
        assert discard_dead_letters(session, ids=[first]) == [first]
        assert discard_dead_letters(session) == []  # nothing named, nothing gone
    with ldb() as session:
        assert open_raw_letters(session) == 1


def test_the_defaults_bound_the_raw_letters_to_a_small_table() -> None:
    settings = Settings()
    assert settings.dead_letter_raw_max_bytes == 64 * 1024
    assert settings.dead_letter_raw_max_open == 1000
    # Base64 and the JSON around it: at most about 90 MB of open raw letters.
    worst = settings.dead_letter_raw_max_open * (settings.dead_letter_raw_max_bytes * 4 / 3 + 512)
    assert worst < 100 * 1024 * 1024
