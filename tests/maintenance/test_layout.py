"""`memwell maintenance cluster`: each user's memories end up physically together."""

from __future__ import annotations

from datetime import timedelta

from click.testing import CliRunner
from sqlalchemy import create_engine, pool, text
from sqlalchemy.orm import Session, sessionmaker

from memwell.local.cli import main
from memwell.maintenance.layout import cluster_memories
from tests.support.memory_factory import NOW, QUERY, add_memory


def _user_runs(db: sessionmaker[Session], tenant: str) -> int:
    """How many runs of one user the tenant's rows form, in physical (ctid) order."""
    with db() as session:
        users = session.scalars(
            text("SELECT user_id FROM memories WHERE tenant = :t ORDER BY ctid"), {"t": tenant}
        ).all()
    return 1 + sum(a != b for a, b in zip(users, users[1:], strict=False))


def test_cluster_puts_each_users_rows_together(
    db: sessionmaker[Session], database_url: str, ids: dict[str, str]
) -> None:
    tenant = ids["tenant"]
    with db.begin() as session:
        for i in range(30):  # three users taking turns, as live traffic writes them
            add_memory(
                session, tenant=tenant, user_id=f"u{i % 3}", content=f"memory {i}",
                embedding=QUERY, created_at=NOW + timedelta(seconds=i),
            )  # fmt: skip
    assert _user_runs(db, tenant) > 3

    engine = create_engine(database_url, poolclass=pool.NullPool)
    try:
        dry = cluster_memories(engine, dry_run=True)
        assert not dry.clustered and dry.rows >= 30
        assert _user_runs(db, tenant) > 3  # a dry run moves nothing
        report = cluster_memories(engine)
    finally:
        engine.dispose()
    assert report.clustered and report.rows >= 30
    assert _user_runs(db, tenant) == 3


def test_cluster_command_reports_json(database_url: str, stack_env: dict[str, str]) -> None:
    result = CliRunner().invoke(main, ["maintenance", "cluster", "--dry-run"], env=stack_env)
    assert result.exit_code == 0, result.output
    assert '"clustered": false' in result.output
