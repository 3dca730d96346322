"""A re-embed's scope (the store, a tenant, or a user) as SQL fragments."""

from __future__ import annotations

from typing import Any

from memwell.db.models import EmbeddingMigration


def scope_sql(m: EmbeddingMigration, alias: str = "m") -> tuple[str, dict[str, Any]]:
    """`AND ...` conditions restricting `alias` to the scope, and their parameters."""
    where, params = "", {}
    if m.tenant is not None:
        where += f" AND {alias}.tenant = :scope_tenant"
        params["scope_tenant"] = m.tenant
    if m.user_id is not None:
        where += f" AND {alias}.user_id = :scope_user"
        params["scope_user"] = m.user_id
    return where, params
