"""Row-level security, the second line of defence behind `WHERE tenant = ...`.

Every transaction of a tenant-scoped session starts by switching to the role
`memwell_app` and setting `memwell.tenant` (both transaction-local, in one round
trip). The tables' RLS policy (migration 0004) then hides other tenants' rows and
refuses writes into them, even when a query forgets its tenant filter. The role is
neither a superuser nor a table owner, so the policy binds it even though the
service may connect as the owner (the embedded `postgres` user is both).

A tenant-scoped session without a tenant fails closed: it sees no rows at all.
Where the tenant comes from, in order: `session.info["tenant"]`, then the
`current_tenant` context variable (set by the API's auth dependency per request).

Cross-tenant maintenance (the sweeper, dead letters, key lookups, migrations) uses
a plain session on the connecting role instead; see `make_sessionmaker`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Final

from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, SessionTransaction, sessionmaker

TENANT_ROLE: Final = "memwell_app"
TENANT_SETTING: Final = "memwell.tenant"

#: The authenticated tenant of the current request (API); unset elsewhere.
current_tenant: ContextVar[str | None] = ContextVar("memwell_current_tenant", default=None)

_ENTER = text("SELECT set_config('role', :role, true), set_config('memwell.tenant', :tenant, true)")


class TenantScopedSession(Session):
    """A Session whose every transaction runs as `memwell_app` for one tenant."""


@event.listens_for(TenantScopedSession, "after_begin")
def _enter_tenant(session: Session, _tx: SessionTransaction, connection: Connection) -> None:
    tenant = session.info.get("tenant") or current_tenant.get()
    # No tenant: an empty setting matches no row (tenant ids are never empty).
    connection.execute(_ENTER, {"role": TENANT_ROLE, "tenant": tenant or ""})


def make_tenant_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Sync tenant-scoped sessions (workers): open them with `tenant_session`."""
    return sessionmaker(engine, class_=TenantScopedSession, expire_on_commit=False)


def make_async_tenant_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Async tenant-scoped sessions (the API's request path)."""
    return async_sessionmaker(
        engine, sync_session_class=TenantScopedSession, expire_on_commit=False
    )


@contextmanager
def tenant_transaction(maker: sessionmaker[Session], tenant: str) -> Iterator[Session]:
    """One transaction as `tenant`, committed on success, rolled back on error."""
    with maker(info={"tenant": tenant}) as session, session.begin():
        yield session


@asynccontextmanager
async def async_tenant_session(
    maker: async_sessionmaker[AsyncSession], tenant: str
) -> AsyncIterator[AsyncSession]:
    """An async session bound to `tenant`; the caller commits if it writes."""
    async with maker(info={"tenant": tenant}) as session:
        yield session
