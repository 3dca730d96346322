"""The psycopg connection under a SQLAlchemy session, for the hot statements.

Why: retrieval's one statement sits on the chat path, where SQLAlchemy's `text()`
execution (bind processing, Row objects) cost about 1 ms per search, and formatting
the query vector as text another 0.15 ms. Run on the driver connection of the same
transaction instead (so the tenant's role and setting, applied by the session's
`after_begin` hook, still hold), the statement is explicitly prepared and its vector
goes over the wire in pgvector's binary form.

The binary dumper is registered on each cursor, not on the connection: registering
pgvector's loaders connection-wide would change what every other query on a pooled
connection returns, depending on whether a search had used it before.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, cast

import numpy as np
import psycopg
from pgvector.psycopg.vector import VectorBinaryDumper
from psycopg import _queries
from psycopg.adapt import Dumper
from psycopg.rows import namedtuple_row
from psycopg.types import TypeInfo
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

_VECTOR_OID = "memwell.vector_oid"
Row = Any

# psycopg remembers how it rewrote a query's placeholders only for texts up to 4 kB; the
# retrieval statement is longer, so it was parsed again on every search (0.15 ms of
# CPU each). Our statements are a handful of shapes, and the cache holds 128 of them.
# A private name: a psycopg without it keeps its own limit (slower, never wrong).
if hasattr(_queries, "MAX_CACHED_STATEMENT_LENGTH"):
    _queries.MAX_CACHED_STATEMENT_LENGTH = max(_queries.MAX_CACHED_STATEMENT_LENGTH, 32 * 1024)


@cache
def _vector_dumper(oid: int) -> type[Dumper]:
    """pgvector's binary dumper bound to this database's `vector` type."""
    return type("QueryVectorDumper", (VectorBinaryDumper,), {"oid": oid})


def missing_vector_type() -> psycopg.ProgrammingError:
    return psycopg.ProgrammingError("the vector type is missing: run `memwell migrate`")


# `:name` reads best in SQL text; the driver takes `%(name)s` (and never `::type`).
_NAMED = re.compile(r"(?<![:\w]):([a-z_]+)")


def pyformat(sql: str) -> str:
    """`sql` with its `:name` placeholders written as psycopg's `%(name)s`."""
    return _NAMED.sub(r"%(\1)s", sql)


async def fetch_vector_oid(raw: psycopg.AsyncConnection[Any]) -> int:
    """The OID of this database's `vector` type."""
    info = await TypeInfo.fetch(raw, "vector")
    if info is None:
        raise missing_vector_type()
    return info.oid


def vector_cursor(raw: Any, oid: int) -> Any:
    """A cursor of `raw` that sends numpy arrays as binary pgvector values; rows by name."""
    cursor = raw.cursor(row_factory=namedtuple_row)
    cursor.adapters.register_dumper(np.ndarray, _vector_dumper(oid))
    return cursor


def fetch_all(connection: Connection, sql: str, binds: dict[str, Any]) -> list[Row]:
    """Run one prepared statement on the session's driver connection; rows by name."""
    raw = cast(psycopg.Connection[Any], connection.connection.driver_connection)
    oid = connection.info.get(_VECTOR_OID)
    if oid is None:
        info = TypeInfo.fetch(raw, "vector")
        if info is None:
            raise missing_vector_type()
        oid = connection.info[_VECTOR_OID] = info.oid
    with vector_cursor(raw, oid) as cursor:
        cursor.execute(sql, binds, prepare=True, binary=True)
        return list(cursor.fetchall())


async def fetch_all_async(
    connection: AsyncConnection, sql: str, binds: dict[str, Any]
) -> list[Row]:
    """`fetch_all` for the async request path."""
    proxied = await connection.get_raw_connection()
    raw = cast(psycopg.AsyncConnection[Any], proxied.driver_connection)
    oid = proxied.info.get(_VECTOR_OID)
    if oid is None:
        oid = proxied.info[_VECTOR_OID] = await fetch_vector_oid(raw)
    async with vector_cursor(raw, oid) as cursor:
        await cursor.execute(sql, binds, prepare=True, binary=True)
        return list(await cursor.fetchall())


def libpq_url(sqlalchemy_uri: str) -> str:
    """Inverse of sqlalchemy_url: what psycopg.connect() accepts."""
    return sqlalchemy_uri.replace("postgresql+psycopg://", "postgresql://", 1)
