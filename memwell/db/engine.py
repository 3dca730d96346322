"""Engines and session factories. One engine per process, created where the process
starts (API lifespan, worker_process_init), never at import time.

Every engine hides a statement's parameters from its errors (`hide_parameters`):
SQLAlchemy otherwise writes them into the exception's text, and a traceback in a log
would then carry users' messages and memories."""

from __future__ import annotations

from sqlalchemy import Engine, create_engine
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session, sessionmaker


def make_engine(url: str, *, pool_size: int = 5) -> Engine:
    """A sync engine (workers, CLI, migrations)."""
    return create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        hide_parameters=True,
        future=True,
    )


def make_async_engine(
    url: str, *, pool_size: int = 10, connect_timeout_s: float | None = None
) -> AsyncEngine:
    """An async engine for the API's request path (`connect_timeout_s`: give up on a
    server that does not answer, such as a replica to fall back from)."""
    connect_args = (
        {"connect_timeout": max(1, round(connect_timeout_s))} if connect_timeout_s else {}
    )
    return create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        hide_parameters=True,
        connect_args=connect_args,
    )


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def make_async_sessionmaker(engine: AsyncEngine) -> async_sessionmaker:  # type: ignore[type-arg]
    return async_sessionmaker(engine, expire_on_commit=False)
