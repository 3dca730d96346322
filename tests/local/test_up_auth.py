"""`memwell up` keeps the README's first command working with no manual step: auth
is off for its children (with a warning) unless the environment says otherwise, and
then the demo gets a fresh key of its own."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.auth.keys import hash_key
from memwell.core.settings import Settings
from memwell.db.models import ApiKey
from memwell.local.up import _auth_env


def test_up_disables_auth_when_unset_and_says_so(
    database_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMWELL_AUTH_DISABLED", raising=False)
    with caplog.at_level(logging.WARNING):
        env = _auth_env(Settings(), database_url, with_demo=True)
    assert env == {"MEMWELL_AUTH_DISABLED": "true"}
    assert any("auth is disabled" in r.getMessage() for r in caplog.records)


def test_up_with_auth_on_gives_the_demo_a_key(
    database_url: str, db: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMWELL_AUTH_DISABLED", "false")
    monkeypatch.delenv("MEMWELL_API_KEY", raising=False)
    env = _auth_env(Settings(), database_url, with_demo=True)
    key = env["MEMWELL_API_KEY"]
    with db() as session:
        row = session.scalars(select(ApiKey).where(ApiKey.key_hash == hash_key(key))).one()
    assert sorted(row.scopes) == ["read", "write"] and row.revoked_at is None
    assert _auth_env(Settings(), database_url, with_demo=False) == {}
