"""Which model a user's memories are in, so searches and writes use that one.

Rules, per (tenant, user), from the newest re-embed that covers them (not aborted):
- none: the process's configured model;
- finished: its target;
- in flight: its target once the user has switched (their rows carry the target's
  name; a user with no rows yet counts as switched once every other has), else the
  model they had before it (the newest finished re-embed's target, else the default).

A user's switch is one transaction, so the model of any one of their rows is the
model of all of them: the per-user check reads one row, on the per-user btree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from memwell.reembed.specs import TargetSpec

IN_FLIGHT = ("running", "paused", "ready", "aborting")

#: Searches cache the list of re-embeds this long (memwell/reembed/query_models.py).
ROUTES_TTL_S = 1.0

ROUTES_SQL = (
    "SELECT id, tenant, user_id, state, target_spec, target_base_url FROM embedding_migrations "
    "WHERE state <> 'aborted' ORDER BY id DESC"
)

# The model of one of the user's embedded rows (all of them share it; see above).
USER_MODEL_SQL = (
    "SELECT embedding_model FROM memories WHERE tenant = %(tenant)s AND user_id = %(user_id)s "
    "AND embedding IS NOT NULL LIMIT 1"
)


@dataclass(frozen=True)
class Route:
    id: int
    tenant: str | None
    user_id: str | None
    state: str
    target: TargetSpec

    @property
    def in_flight(self) -> bool:
        return self.state in IN_FLIGHT

    def covers(self, tenant: str, user_id: str) -> bool:
        return (self.tenant is None or self.tenant == tenant) and (
            self.user_id is None or self.user_id == user_id
        )


def route_from_row(row: Sequence[Any]) -> Route:
    provider, _, model = str(row[4]).partition(":")
    return Route(
        id=int(row[0]),
        tenant=row[1],
        user_id=row[2],
        state=str(row[3]),
        target=TargetSpec(provider=provider, model=model, base_url=row[5]),
    )


def load_routes(session: Session) -> list[Route]:
    """Every re-embed that can decide a user's model, newest first (a small table)."""
    return [route_from_row(r) for r in session.execute(text(ROUTES_SQL)).all()]


@dataclass(frozen=True)
class UserRoute:
    """The re-embed in flight for a user, if any, and the model before it (None: default)."""

    in_flight: Route | None
    base: TargetSpec | None

    def model_for(self, current_model: str | None) -> TargetSpec | None:
        """The model to search (and write primary vectors) with; None: the default."""
        m = self.in_flight
        if m is None:
            return self.base
        if current_model == m.target.model_name or (current_model is None and m.state == "ready"):
            return m.target
        return self.base


def route_user(routes: Iterable[Route], tenant: str, user_id: str) -> UserRoute:
    in_flight: Route | None = None
    for r in routes:
        if not r.covers(tenant, user_id):
            continue
        if r.state == "finished":
            return UserRoute(in_flight=in_flight, base=r.target)
        if r.in_flight and in_flight is None:
            in_flight = r
    return UserRoute(in_flight=in_flight, base=None)


def current_models(
    session: Session, users: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], str | None]:
    """Each user's current model (None: no embedded row yet), one row read per user."""
    pairs = sorted(set(users))
    if not pairs:
        return {}
    rows = session.execute(
        text(
            "SELECT u.tenant, u.user_id, m.embedding_model "
            "FROM unnest(CAST(:tenants AS text[]), CAST(:users AS text[])) AS u(tenant, user_id) "
            "LEFT JOIN LATERAL (SELECT embedding_model FROM memories x "
            "  WHERE x.tenant = u.tenant AND x.user_id = u.user_id AND x.embedding IS NOT NULL "
            "  LIMIT 1) m ON true"
        ),
        {"tenants": [p[0] for p in pairs], "users": [p[1] for p in pairs]},
    ).all()
    return {(r[0], r[1]): r[2] for r in rows}
