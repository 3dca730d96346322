"""API keys: tenant-bound, scoped, stored hashed.

A key is `mw_` + 43 URL-safe characters (256 bits from `secrets`). It is shown once,
at creation; the database keeps only its SHA-256 (a fast hash is right here: the
key is random and long, so there is nothing to brute-force) and a short display
prefix so an operator can tell keys apart. Scopes: read, write, admin; admin
implies the other two.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from memwell.core.errors import InvalidInput, NotFound
from memwell.db.models import ApiKey

Scope = Literal["read", "write", "admin"]
SCOPES: Final[tuple[Scope, ...]] = ("read", "write", "admin")
KEY_PREFIX: Final = "mw_"
DISPLAY_CHARS: Final = 11  # "mw_" + 8 characters


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's tenant, its id (the rate-limit bucket) and scopes."""

    tenant: str
    key_id: str
    scopes: frozenset[str]

    def allows(self, scope: Scope) -> bool:
        return scope in self.scopes or "admin" in self.scopes


@dataclass(frozen=True)
class CreatedKey:
    id: uuid.UUID
    key: str  # the secret, shown once
    prefix: str
    tenant: str
    scopes: list[str]


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", errors="surrogatepass")).hexdigest()


def _valid_scopes(scopes: Iterable[str]) -> list[str]:
    chosen = sorted(set(scopes))
    unknown = [s for s in chosen if s not in SCOPES]
    if unknown or not chosen:
        raise InvalidInput(f"scopes must be a non-empty subset of {', '.join(SCOPES)}")
    return chosen


def create_key(session: Session, *, tenant: str, name: str, scopes: Iterable[str]) -> CreatedKey:
    """Create a key for `tenant`; the returned secret is never stored."""
    if not tenant or not name:
        raise InvalidInput("tenant and name must be non-empty")
    chosen = _valid_scopes(scopes)
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKey(
        tenant=tenant,
        name=name,
        prefix=secret[:DISPLAY_CHARS],
        key_hash=hash_key(secret),
        scopes=chosen,
    )
    session.add(row)
    session.flush()
    return CreatedKey(id=row.id, key=secret, prefix=row.prefix, tenant=tenant, scopes=chosen)


def list_keys(session: Session, *, tenant: str | None = None) -> list[ApiKey]:
    """Keys (never their secrets), newest first; all tenants when `tenant` is None."""
    stmt = select(ApiKey).order_by(ApiKey.created_at.desc())
    if tenant is not None:
        stmt = stmt.where(ApiKey.tenant == tenant)
    return list(session.scalars(stmt).all())


def revoke_key(session: Session, *, key_id: str) -> datetime:
    """Revoke a key by id or display prefix; returns when. Unknown or ambiguous: error."""
    stmt = select(ApiKey).where(ApiKey.revoked_at.is_(None))
    try:
        stmt = stmt.where(ApiKey.id == uuid.UUID(key_id))
    except ValueError:
        stmt = stmt.where(ApiKey.prefix == key_id)
    rows = session.scalars(stmt).all()
    if len(rows) != 1:
        raise NotFound(f"no single live key matches {key_id!r}")
    result = session.execute(
        update(ApiKey)
        .where(ApiKey.id == rows[0].id)
        .values(revoked_at=func.now())
        .returning(ApiKey.revoked_at)
    )
    revoked: datetime | None = result.scalar_one()
    assert revoked is not None
    return revoked


async def authenticate(session: AsyncSession, key: str) -> Principal | None:
    """The principal of a live key, or None for an unknown or revoked one."""
    if not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    row = (
        await session.execute(
            select(ApiKey.id, ApiKey.tenant, ApiKey.scopes).where(
                ApiKey.key_hash == hash_key(key), ApiKey.revoked_at.is_(None)
            )
        )
    ).one_or_none()
    if row is None:
        return None
    return Principal(tenant=row.tenant, key_id=str(row.id), scopes=frozenset(row.scopes))
