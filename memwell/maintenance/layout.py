"""Rewrite `memories` in (tenant, user_id, created_at) order, so each user's rows sit together.

Why: retrieval's exact path reads every visible row of the asking user. Stored as they
arrive, a user's memories lie one to a page among everyone else's, so a search touches
as many pages as the user has rows, scattered through memory. Clustered, the same rows
fill a few pages in order. Measured at 1M rows / 1,000 users (a different user per
search): the full search p50 2.5 -> 1.6 ms, a bare top-10 1.5 -> 0.7 ms.

Not a beat job: CLUSTER holds an ACCESS EXCLUSIVE lock for the whole rewrite (16 s at
1M rows here, table in memory), so every search and write waits for it. It is for a
quiet window, by hand. `lock_timeout` makes it give up instead of queueing behind a
long transaction while every new query queues behind it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from sqlalchemy import Connection, Engine, text

USER_INDEX = "ix_memories_user"


@dataclass(frozen=True)
class LayoutReport:
    rows: int
    #: Postgres's estimate of how well the table's physical order follows user_id
    #: (1: in order; near 0: scattered), from the last ANALYZE
    user_order_before: float | None
    user_order_after: float | None
    seconds: float
    clustered: bool

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _user_order(conn: Connection) -> float | None:
    conn.execute(text("ANALYZE memories"))
    value = conn.execute(
        text(
            "SELECT correlation FROM pg_stats WHERE schemaname = current_schema()"
            " AND tablename = 'memories' AND attname = 'user_id'"
        )
    ).scalar()
    return None if value is None else round(float(value), 3)


def cluster_memories(
    engine: Engine, *, lock_timeout_s: float = 5.0, dry_run: bool = False
) -> LayoutReport:
    """CLUSTER `memories` by user (unless `dry_run`); report the order before and after."""
    started = time.monotonic()
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        rows = int(conn.execute(text("SELECT count(*) FROM memories")).scalar_one())
        before = _user_order(conn)
        after = before
        if not dry_run:
            conn.execute(
                text("SELECT set_config('lock_timeout', :t, false)"), {"t": f"{lock_timeout_s}s"}
            )
            conn.execute(text(f"CLUSTER memories USING {USER_INDEX}"))
            conn.execute(text("RESET lock_timeout"))
            after = _user_order(conn)
    return LayoutReport(
        rows=rows,
        user_order_before=before,
        user_order_after=after,
        seconds=round(time.monotonic() - started, 2),
        clustered=not dry_run,
    )
